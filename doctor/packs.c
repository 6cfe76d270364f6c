/* The execution-provider packs (`bundle build --ep`): whether each can run on this machine.
 * A pack record names one of three probes; each asks Windows what the pack needs and returns
 * a verdict with one sentence saying why. The DLLs asked (nvcuda, dxgi, d3d12) are loaded from
 * System32 at run time, never imported: the doctor must start where they are missing.
 *   nvidia-cuda  nvcuda.dll: the driver version (its FileVersion) and the GPUs' compute
 *                capability against the pack's floors
 *   intel        the CPU's CPUID vendor, and the DXGI adapters' PCI vendor 0x8086
 *   d3d12        a DXGI adapter (not the software one) on which D3D12CreateDevice succeeds
 * --eps prints the verdicts alone (the installer asks it which components to select); the
 * full report turns them into BA811 / BA812, or BA813 for a pack whose folder is absent. */
#include "doctor.h"

#define COBJMACROS
#include <cpuid.h>
#include <dxgi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INTEL_VENDOR 0x8086
#define D3D_FEATURE_LEVEL_11_0 0xb000

/* The interface ids (dxgi.h, d3d12.h): defined here, so no GUID library is linked. */
static const GUID FACTORY1_IID = {
    0x770aae78, 0xf26f, 0x4dba, {0xa8, 0x29, 0x25, 0x3c, 0x83, 0xd1, 0xb3, 0x87}};
static const GUID D3D12_DEVICE_IID = {
    0x189819f1, 0x1db6, 0x4b57, {0xbe, 0x54, 0x18, 0x21, 0x33, 0x9b, 0x85, 0xf7}};

static HMODULE system_dll(const wchar_t *name)
{
    return LoadLibraryExW(name, NULL, LOAD_LIBRARY_SEARCH_SYSTEM32);
}

/* --- nvidia-cuda --------------------------------------------------------------------------- */

static int capability_below(const Gpu *gpu, const char *floor)
{
    char have[32];
    snprintf(have, sizeof have, "%d.%d", gpu->major, gpu->minor);
    return version_below(have, floor);
}

static int probe_nvidia(Doctor *doctor, const PackRec *pack, char **reason)
{
    Machine *m = &doctor->machine;
    machine_nvidia(m, "nvcuda.dll");
    if (!m->have_driver) {
        *reason = xstrdup("no NVIDIA driver (nvcuda.dll is not in System32)");
        return 0;
    }
    StrBuf why;
    sb_init(&why);
    int has_floor = strcmp(pack->min_driver, "-") != 0;
    if (has_floor && !m->driver_version[0])
        sb_printf(&why, "the NVIDIA driver's version is unknown (nvcuda.dll has no FileVersion); "
                        "the pack needs %s or newer", pack->min_driver);
    else if (has_floor && version_below(m->driver_version, pack->min_driver))
        sb_printf(&why, "the NVIDIA driver %s is older than %s", m->driver_version,
                  pack->min_driver);
    const Gpu *found = NULL;
    int any_floor = strcmp(pack->min_capability, "-") != 0;
    for (size_t i = 0; i < m->n_gpus && !found; i++)
        if (!any_floor || !capability_below(&m->gpus[i], pack->min_capability))
            found = &m->gpus[i];
    if (m->gpu_problem) {
        sb_printf(&why, "%sno usable NVIDIA GPU: %s", why.len ? "; " : "", m->gpu_problem);
    } else if (!found) {
        sb_printf(&why, "%sno NVIDIA GPU of compute capability %s or newer:", why.len ? "; " : "",
                  pack->min_capability);
        for (size_t i = 0; i < m->n_gpus; i++)
            sb_printf(&why, "%s CUDA device %zu (%s) is sm_%d%d (compute capability %d.%d)",
                      i ? ";" : "", i, m->gpus[i].name, m->gpus[i].major, m->gpus[i].minor,
                      m->gpus[i].major, m->gpus[i].minor);
    }
    if (why.len) {
        *reason = why.text;
        return 0;
    }
    free(why.text);
    *reason = xprintf("%s (sm_%d%d), driver %s", found->name, found->major, found->minor,
                      m->driver_version[0] ? m->driver_version : "of unknown version");
    return 1;
}

/* --- DXGI adapters ------------------------------------------------------------------------- */

typedef struct {
    char *name;
    unsigned vendor, device;
    IDXGIAdapter1 *adapter;
} Adapter;

typedef HRESULT(WINAPI *CreateFactory1)(REFIID, void **);

/* The hardware adapters DXGI lists (the software one, Microsoft Basic Render Driver, left
 * out), each still referenced; NULL when there are some or none, else why there are none. */
static char *dxgi_adapters(Adapter **adapters, size_t *n)
{
    *adapters = NULL;
    *n = 0;
    HMODULE dxgi = system_dll(L"dxgi.dll");
    if (!dxgi)
        return xprintf("dxgi.dll cannot be loaded from System32 (error %lu)", GetLastError());
    CreateFactory1 create = (CreateFactory1)(void *)GetProcAddress(dxgi, "CreateDXGIFactory1");
    if (!create)
        return xstrdup("dxgi.dll has no CreateDXGIFactory1");
    IDXGIFactory1 *factory = NULL;
    HRESULT hr = create(&FACTORY1_IID, (void **)&factory);
    if (FAILED(hr) || !factory)
        return xprintf("CreateDXGIFactory1 failed with HRESULT 0x%08lx", (unsigned long)hr);
    IDXGIAdapter1 *adapter = NULL;
    for (UINT i = 0; IDXGIFactory1_EnumAdapters1(factory, i, &adapter) == S_OK; i++) {
        DXGI_ADAPTER_DESC1 desc;
        if (FAILED(IDXGIAdapter1_GetDesc1(adapter, &desc)) ||
            (desc.Flags & DXGI_ADAPTER_FLAG_SOFTWARE)) {
            IDXGIAdapter1_Release(adapter);
            continue;
        }
        desc.Description[sizeof desc.Description / sizeof desc.Description[0] - 1] = L'\0';
        *GROW(*adapters, *n) =
            (Adapter){narrow(desc.Description), desc.VendorId, desc.DeviceId, adapter};
    }
    IDXGIFactory1_Release(factory);
    return NULL;
}

static void free_adapters(Adapter *adapters, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        IDXGIAdapter1_Release(adapters[i].adapter);
        free(adapters[i].name);
    }
    free(adapters);
}

/* "NAME (0xVVVV), NAME (0xVVVV)"; `problem` or "none" when there are none */
static void adapter_list(StrBuf *out, const Adapter *adapters, size_t n, const char *problem)
{
    for (size_t i = 0; i < n; i++)
        sb_printf(out, "%s%s (0x%04x)", i ? ", " : "", adapters[i].name, adapters[i].vendor);
    if (!n)
        sb_add(out, problem ? problem : "none");
}

/* --- intel --------------------------------------------------------------------------------- */

/* The CPUID vendor string (leaf 0: EBX, EDX, ECX), e.g. GenuineIntel, AuthenticAMD. */
static void cpu_vendor(char out[13])
{
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) {
        strcpy(out, "unknown");
        return;
    }
    memcpy(out, &b, 4);
    memcpy(out + 4, &d, 4);
    memcpy(out + 8, &c, 4);
    out[12] = '\0';
}

static int probe_intel(char **reason)
{
    char vendor[13];
    cpu_vendor(vendor);
    int cpu = strcmp(vendor, "GenuineIntel") == 0;
    Adapter *adapters;
    size_t n;
    char *problem = dxgi_adapters(&adapters, &n);
    StrBuf found;
    sb_init(&found);
    for (size_t i = 0; i < n; i++)
        if (adapters[i].vendor == INTEL_VENDOR)
            sb_printf(&found, "%s%s (0x%04x)", found.len ? ", " : "", adapters[i].name,
                      adapters[i].vendor);
    int gpus = found.len > 0;
    StrBuf why;
    sb_init(&why);
    if (cpu)
        sb_add(&why, "an Intel CPU (GenuineIntel)");
    if (gpus)
        sb_printf(&why, "%sIntel GPU: %s", cpu ? "; " : "", found.text);
    if (gpus && !cpu)
        sb_printf(&why, "; the CPU is %s", vendor);
    free(found.text);
    if (!cpu && !gpus) {
        sb_printf(&why, "no Intel CPU or GPU: the CPU is %s; adapters: ", vendor);
        adapter_list(&why, adapters, n, problem);
    }
    free_adapters(adapters, n);
    free(problem);
    *reason = why.text;
    return cpu || gpus;
}

/* --- d3d12 --------------------------------------------------------------------------------- */

typedef HRESULT(WINAPI *CreateDevice)(IUnknown *, int, REFIID, void **);

static int probe_d3d12(char **reason)
{
    HMODULE d3d12 = system_dll(L"d3d12.dll");
    if (!d3d12) {
        *reason = xprintf("no Direct3D 12: d3d12.dll cannot be loaded from System32 (error %lu)",
                          GetLastError());
        return 0;
    }
    CreateDevice create = (CreateDevice)(void *)GetProcAddress(d3d12, "D3D12CreateDevice");
    if (!create) {
        *reason = xstrdup("no Direct3D 12: d3d12.dll has no D3D12CreateDevice");
        return 0;
    }
    Adapter *adapters;
    size_t n;
    char *problem = dxgi_adapters(&adapters, &n);
    StrBuf failed;
    sb_init(&failed);
    int usable = 0;
    for (size_t i = 0; i < n && !usable; i++) {
        /* ppDevice NULL: S_FALSE when a device could be created, nothing is created */
        HRESULT hr = create((IUnknown *)adapters[i].adapter, D3D_FEATURE_LEVEL_11_0,
                            &D3D12_DEVICE_IID, NULL);
        if (SUCCEEDED(hr)) {
            usable = 1;
            *reason = xprintf("Direct3D 12 on %s (0x%04x)", adapters[i].name, adapters[i].vendor);
        } else {
            sb_printf(&failed, "%s%s (0x%04x): D3D12CreateDevice 0x%08lx", i ? ", " : "",
                      adapters[i].name, adapters[i].vendor, (unsigned long)hr);
        }
    }
    if (!usable && n)
        *reason = xprintf("no adapter with Direct3D 12 (feature level 11_0): %s", failed.text);
    else if (!usable)
        *reason = xprintf("no display adapter for Direct3D 12: %s",
                          problem ? problem : "DXGI lists none but the software one");
    free(failed.text);
    free_adapters(adapters, n);
    free(problem);
    return usable;
}

/* --- verdicts and findings ----------------------------------------------------------------- */

int pack_usable(Doctor *doctor, const PackRec *pack, char **reason)
{
    if (strcmp(pack->probe, "nvidia-cuda") == 0)
        return probe_nvidia(doctor, pack, reason);
    if (strcmp(pack->probe, "intel") == 0)
        return probe_intel(reason);
    return probe_d3d12(reason);
}

static int is_folder(const Data *data, const char *relative)
{
    wchar_t *path = bundle_path(data, relative);
    DWORD attributes = GetFileAttributesW(path);
    free(path);
    return attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY);
}

int in_absent_pack(const Data *data, const char *path)
{
    for (size_t i = 0; i < data->n_packs; i++) {
        const char *folder = data->packs[i].folder;
        size_t n = strlen(folder);
        if (_strnicmp(path, folder, n) == 0 && path[n] == '/' && !is_folder(data, folder))
            return 1;
    }
    return 0;
}

void check_packs(Doctor *doctor)
{
    const Data *data = doctor->data;
    for (size_t i = 0; i < data->n_packs; i++) {
        const PackRec *pack = &data->packs[i];
        Finding *f;
        if (!is_folder(data, pack->folder)) {
            f = add_finding(doctor, "BA813",
                            xprintf("EP pack %s is not installed (%s is absent)", pack->name,
                                    pack->folder));
        } else {
            char *reason = NULL;
            if (pack_usable(doctor, pack, &reason))
                f = add_finding(doctor, "BA811",
                                xprintf("EP pack %s can run here: %s", pack->name, reason));
            else
                f = add_finding(doctor, "BA812",
                                xprintf("EP pack %s has no device here: %s; it needs %s",
                                        pack->name, reason, pack->needs));
            free(reason);
        }
        finding_file(f, pack->plugin);
    }
}

void ep_lines(Doctor *doctor, const char *kind, StrBuf *out)
{
    for (size_t i = 0; i < doctor->data->n_packs; i++) {
        const PackRec *pack = &doctor->data->packs[i];
        char *reason = NULL;
        int usable = pack_usable(doctor, pack, &reason);
        /* a reason is one line without TAB: the installer splits at TAB */
        for (char *p = reason; *p; p++)
            if (*p == '\t' || *p == '\n' || *p == '\r')
                *p = ' ';
        sb_printf(out, "%s\t%s\t%s\t%s\n", kind, pack->name, usable ? "yes" : "no", reason);
        free(reason);
    }
}
