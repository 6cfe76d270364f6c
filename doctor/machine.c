/* The machine: what Windows, the NVIDIA driver and a file's version resource say, asked once
 * and kept in a Machine, adding no finding. The checks (checks.c) and the execution-provider
 * packs' probes (packs.c) both read it, and it calls neither: it sits below them. The driver
 * is loaded from System32 at run time, never imported: the doctor must start where it is
 * missing. */
#include "doctor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- Windows ------------------------------------------------------------------------------- */

/* RtlGetVersion tells the truth where GetVersionEx lies to unmanifested programs; ntdll is in
 * every process, so GetModuleHandle finds it without an import. */
void machine_windows(Machine *machine)
{
    typedef LONG(WINAPI * RtlGetVersion)(OSVERSIONINFOW *);
    HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
    RtlGetVersion get = ntdll ? (RtlGetVersion)(void *)GetProcAddress(ntdll, "RtlGetVersion") : NULL;
    OSVERSIONINFOW info = {.dwOSVersionInfoSize = sizeof info};
    if (get && get(&info) == 0)
        snprintf(machine->windows, sizeof machine->windows, "%lu.%lu.%lu",
                         info.dwMajorVersion, info.dwMinorVersion, info.dwBuildNumber);
    else
        strcpy(machine->windows, "unknown");
}

/* --- versions ------------------------------------------------------------------------------ */

int file_version(const wchar_t *path, char *out, size_t n)
{
    DWORD ignored = 0;
    DWORD size = GetFileVersionInfoSizeW(path, &ignored);
    out[0] = '\0';
    if (!size)
        return 0;
    void *block = xrealloc(NULL, size);
    VS_FIXEDFILEINFO *info = NULL;
    UINT len = 0;
    int ok = GetFileVersionInfoW(path, 0, size, block) &&
             VerQueryValueW(block, L"\\", (void **)&info, &len) && info && len >= sizeof *info &&
             info->dwSignature == 0xFEEF04BD;
    if (ok)
        snprintf(out, n, "%u.%u.%u.%u", (unsigned)HIWORD(info->dwFileVersionMS),
                         (unsigned)LOWORD(info->dwFileVersionMS), (unsigned)HIWORD(info->dwFileVersionLS),
                         (unsigned)LOWORD(info->dwFileVersionLS));
    free(block);
    return ok;
}

int version_below(const char *version, const char *floor)
{
    while (*floor) {
        unsigned long have = strtoul(version, (char **)&version, 10);
        unsigned long want = strtoul(floor, (char **)&floor, 10);
        if (have != want)
            return have < want;
        if (*floor == '.')
            floor++;
        if (*version == '.')
            version++;
    }
    return 0;
}

/* --- the NVIDIA driver and its GPUs -------------------------------------------------------- */

typedef int(WINAPI *CuInt)(int *);
typedef int(WINAPI *CuInit)(unsigned int);
typedef int(WINAPI *CuDeviceGet)(int *, int);
typedef int(WINAPI *CuDeviceGetName)(char *, int, int);
typedef int(WINAPI *CuDeviceGetAttribute)(int *, int, int);
typedef int(WINAPI *CuDeviceTotalMem)(size_t *, int);

#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

/* NVIDIA's driver version is the last five digits of the DLL's last two version parts:
 * 31.0.15.5161 -> 15 5161 -> 55161 -> 551.61. */
static void driver_version(const char *dll_version, char *out, size_t n)
{
    unsigned a, b, c, d;
    out[0] = '\0';
    if (sscanf(dll_version, "%u.%u.%u.%u", &a, &b, &c, &d) == 4) {
        unsigned five = (c % 10) * 10000 + d % 10000;
        snprintf(out, n, "%u.%02u", five / 100, five % 100);
    }
}

static const char *cuda_error_name(int code)
{
    switch (code) {
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 999: return "CUDA_ERROR_UNKNOWN";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 35: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 304: return "CUDA_ERROR_OPERATING_SYSTEM";
    default: return "see the CUDA driver API's CUresult";
    }
}

/* The GPUs the driver lists, into m->gpus; or what went wrong, into m->gpu_problem. */
static void query_gpus(Machine *m, HMODULE cuda, const char *dll)
{
    CuInit init = (CuInit)(void *)GetProcAddress(cuda, "cuInit");
    CuInt count_of = (CuInt)(void *)GetProcAddress(cuda, "cuDeviceGetCount");
    CuDeviceGet get = (CuDeviceGet)(void *)GetProcAddress(cuda, "cuDeviceGet");
    CuDeviceGetName name_of = (CuDeviceGetName)(void *)GetProcAddress(cuda, "cuDeviceGetName");
    CuDeviceGetAttribute attribute =
        (CuDeviceGetAttribute)(void *)GetProcAddress(cuda, "cuDeviceGetAttribute");
    CuDeviceTotalMem memory = (CuDeviceTotalMem)(void *)GetProcAddress(cuda, "cuDeviceTotalMem_v2");
    if (!init || !count_of || !get) {
        m->gpu_problem = xprintf("%s lacks cuInit/cuDeviceGetCount/cuDeviceGet: not a working "
                                 "NVIDIA driver", dll);
        return;
    }
    int result = init(0), count = 0;
    if (result != 0) {
        m->gpu_problem = xprintf("cuInit failed with CUDA error %d (%s): the driver sees no "
                                 "usable NVIDIA GPU", result, cuda_error_name(result));
        return;
    }
    if ((result = count_of(&count)) != 0 || count <= 0) {
        m->gpu_problem = result ? xprintf("cuDeviceGetCount failed with CUDA error %d (%s)",
                                          result, cuda_error_name(result))
                                : xstrdup("the NVIDIA driver reports no CUDA device");
        return;
    }
    m->gpus = xrealloc(NULL, sizeof *m->gpus * (size_t)count);
    for (int i = 0; i < count; i++) {
        int device = 0;
        Gpu *gpu = &m->gpus[m->n_gpus];
        memset(gpu, 0, sizeof *gpu);
        if (get(&device, i) != 0)
            continue;
        if (!name_of || name_of(gpu->name, (int)sizeof gpu->name - 1, device) != 0)
            snprintf(gpu->name, sizeof gpu->name, "CUDA device %d", i);
        gpu->name[sizeof gpu->name - 1] = '\0';
        if (attribute) {
            attribute(&gpu->major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
            attribute(&gpu->minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
        }
        size_t bytes = 0;
        if (memory && memory(&bytes, device) == 0)
            gpu->memory = bytes;
        m->n_gpus++;
    }
}

void machine_nvidia(Machine *m, const char *dll)
{
    if (m->nvidia_asked)
        return;
    m->nvidia_asked = 1;
    wchar_t *name = widen(dll);
    HMODULE cuda = LoadLibraryExW(name, NULL, LOAD_LIBRARY_SEARCH_SYSTEM32);
    free(name);
    if (!cuda)
        return;
    m->have_driver = 1;
    wchar_t path[MAX_PATH * 2];
    if (GetModuleFileNameW(cuda, path, MAX_PATH * 2)) {
        m->driver_path = _wcsdup(path);
        if (file_version(path, m->dll_version, sizeof m->dll_version))
            driver_version(m->dll_version, m->driver_version, sizeof m->driver_version);
    }
    CuInt version_of = (CuInt)(void *)GetProcAddress(cuda, "cuDriverGetVersion");
    int cuda_version = 0;
    if (version_of && version_of(&cuda_version) == 0 && cuda_version > 0)
        snprintf(m->cuda_version, sizeof m->cuda_version, "%d.%d", cuda_version / 1000,
                         (cuda_version % 1000) / 10);
    query_gpus(m, cuda, dll);
}
