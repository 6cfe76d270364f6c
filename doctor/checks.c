/* The checks. Each asks this machine one kind of question and adds findings; none of them
 * re-derives what the build knew: the files, versions, imports, GPU code and load order all
 * come from the data file. Search orders follow the Windows loader
 * (learn.microsoft.com/windows/win32/dlls/dynamic-link-library-search-order). */
#include "doctor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- paths and versions -------------------------------------------------------------------- */

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static wchar_t *join(const wchar_t *folder, const char *name)
{
    wchar_t *wide = widen(name);
    size_t n = wcslen(folder) + 1 + wcslen(wide) + 1;
    wchar_t *full = xrealloc(NULL, n * sizeof(wchar_t));
    wcscpy(full, folder);
    if (n > 2 && full[wcslen(full) - 1] != L'\\')
        wcscat(full, L"\\");
    wcscat(full, wide);
    free(wide);
    return full;
}

static int is_file(const wchar_t *path)
{
    DWORD attributes = GetFileAttributesW(path);
    return attributes != INVALID_FILE_ATTRIBUTES && !(attributes & FILE_ATTRIBUTE_DIRECTORY);
}

static wchar_t *system_folder(void)
{
    static wchar_t folder[MAX_PATH];
    if (!folder[0] && !GetSystemDirectoryW(folder, MAX_PATH))
        wcscpy(folder, L"C:\\Windows\\System32");
    return folder;
}

static int same_version(const char *a, const char *b)
{
    return !version_below(a, b) && !version_below(b, a);
}

/* --- 1. files ------------------------------------------------------------------------------ */

void check_files(Doctor *doctor)
{
    const Data *data = doctor->data;
    for (size_t i = 0; i < data->n_files; i++) {
        const FileRec *rec = &data->files[i];
        if (in_absent_pack(data, rec->path)) /* a pack not installed: BA813 says so */
            continue;
        wchar_t *path = bundle_path(data, rec->path);
        WIN32_FILE_ATTRIBUTE_DATA info;
        Finding *finding = NULL;
        if (!GetFileAttributesExW(path, GetFileExInfoStandard, &info) ||
            (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)) {
            finding = add_finding(doctor, "BA402",
                                  xprintf("%s is absent (%s file, %llu bytes)", rec->path,
                                          rec->kind, rec->size));
        } else {
            unsigned long long size = ((unsigned long long)info.nFileSizeHigh << 32) | info.nFileSizeLow;
            char digest[65];
            unsigned long error;
            if (size != rec->size)
                finding = add_finding(doctor, "BA401",
                                      xprintf("%s is %llu bytes; the build wrote %llu", rec->path,
                                              size, rec->size));
            else if (doctor->verify && (error = sha256_file(path, digest)) != 0)
                finding = add_finding(doctor, "BA401",
                                      xprintf("%s cannot be read to check its SHA-256 (error %lu)",
                                              rec->path, error));
            else if (doctor->verify && strcmp(digest, rec->sha256) != 0) {
                finding = add_finding(doctor, "BA401",
                                      xprintf("%s has another SHA-256 than the build wrote "
                                              "(same size: changed or corrupted)", rec->path));
                finding_detail(finding, xprintf("SHA-256 now:   %s", digest));
                finding_detail(finding, xprintf("SHA-256 built: %s", rec->sha256));
            }
        }
        if (finding)
            finding_file(finding, rec->path);
        free(path);
    }
}

/* --- 1b. the runtime pack ------------------------------------------------------------------ */

/* The first word of bundle-pack.txt (a UTF-8 BOM and blanks before it skipped), lowercase:
 * what `bundle audit` reads. A byte that is not printable ASCII becomes '?', so a damaged file
 * still gives a report in UTF-8 and valid JSON. NULL when there is no file; "" when it is empty
 * or cannot be read: it then names no pack, which matches none (BA406, as in the audit). */
static char *read_pack_marker(const Data *data)
{
    wchar_t *path = bundle_path(data, PACK_MARKER);
    HANDLE file = CreateFileW(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, NULL,
                              OPEN_EXISTING, 0, NULL);
    free(path);
    if (file == INVALID_HANDLE_VALUE) {
        DWORD error = GetLastError();
        return error == ERROR_FILE_NOT_FOUND || error == ERROR_PATH_NOT_FOUND ? NULL : xstrdup("");
    }
    char text[256]; /* a pack's hash is 64 digits: a longer word names no pack either way */
    DWORD got = 0;
    if (!ReadFile(file, text, sizeof text - 1, &got, NULL))
        got = 0;
    CloseHandle(file);
    text[got] = '\0';
    const char *p = got >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0 ? text + 3 : text;
    p += strspn(p, " \t\r\n");
    size_t n = strcspn(p, " \t\r\n");
    char *word = xrealloc(NULL, n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        word[i] = c >= 'A' && c <= 'Z' ? (char)(c + 'a' - 'A') : c > ' ' && c < 127 ? (char)c : '?';
    }
    word[n] = '\0';
    return word;
}

int runtime_pack_matches(const Doctor *doctor)
{
    const char *installed = doctor->installed_pack;
    return installed && strcmp(installed, doctor->data->runtime_pack) == 0;
}

void check_runtime_pack(Doctor *doctor)
{
    const Data *data = doctor->data;
    if (!data->runtime_pack) /* an older data file: no pack to compare with */
        return;
    doctor->pack_asked = 1;
    doctor->installed_pack = read_pack_marker(data);
    /* no marker: a folder `bundle build` wrote, or a setup without a runtime pack */
    if (!doctor->installed_pack || runtime_pack_matches(doctor))
        return;
    const char *installed = doctor->installed_pack;
    char *message =
        *installed ? xprintf("%s says the folder holds runtime pack %.16s, the app's lock names "
                             "%.16s: the app and its runtime come from different releases",
                             PACK_MARKER, installed, data->runtime_pack)
                   : xprintf("%s names no runtime pack (it is empty or cannot be read), the "
                             "app's lock names %.16s: install the app's setup again",
                             PACK_MARKER, data->runtime_pack);
    finding_file(add_finding(doctor, "BA406", message), PACK_MARKER);
}

/* --- 2./3. driver and GPUs ----------------------------------------------------------------- */

static void check_driver_versions(Doctor *doctor, const char *dll)
{
    const Data *data = doctor->data;
    Machine *m = &doctor->machine;
    if (m->driver_version[0] && version_below(m->driver_version, data->driver_min)) {
        Finding *f = add_finding(doctor, "BA802",
                                 xprintf("the NVIDIA driver is %s; the bundle needs %s or newer "
                                         "(CUDA %d)", m->driver_version, data->driver_min, data->cuda_major));
        finding_file(f, dll);
        finding_detail(f, xprintf("%s FileVersion %s = driver %s", dll, m->dll_version, m->driver_version));
    }
    if (m->cuda_version[0] && atoi(m->cuda_version) < data->cuda_major) {
        Finding *f = add_finding(doctor, "BA802",
                                 xprintf("the NVIDIA driver supports CUDA %s; the bundle needs CUDA "
                                         "%d (driver %s or newer)", m->cuda_version, data->cuda_major,
                                         data->driver_min));
        finding_file(f, dll);
    }
}

/* An arch name of the data file: sm_86 -> 8, 6, ''; sm_120 -> 12, 0, ''; sm_90a -> 9, 0, 'a'. */
typedef struct {
    int major, minor;
    char suffix;
} Arch;

static const char *next_arch(const char *p, Arch *arch)
{
    p = strchr(p, '_') + 1;
    int number = 0;
    while (*p >= '0' && *p <= '9')
        number = number * 10 + (*p++ - '0');
    arch->major = number / 10;
    arch->minor = number % 10;
    arch->suffix = (*p == 'a' || *p == 'f') ? *p++ : '\0';
    return *p == ',' ? p + 1 : NULL;
}

/* SASS: plain and 'f' run on the same major with an equal or higher minor; 'a' only on
 * exactly that capability. PTX: plain is JIT-compiled for any capability >= its own; 'a' only
 * for exactly that one; 'f' for the same major from that minor on. */
static int runs_on(const Arch *arch, const Gpu *gpu, int ptx)
{
    if (arch->suffix == 'a')
        return gpu->major == arch->major && gpu->minor == arch->minor;
    if (ptx && arch->suffix == '\0')
        return gpu->major > arch->major || (gpu->major == arch->major && gpu->minor >= arch->minor);
    return gpu->major == arch->major && gpu->minor >= arch->minor;
}

/* 2 native, 1 JIT from the newest PTX that fits (its name into ptx_used), 0 none */
static int coverage(const GpuRec *rec, const Gpu *gpu, char *ptx_used, size_t n)
{
    Arch arch;
    if (strcmp(rec->sass, "-") != 0)
        for (const char *p = rec->sass; p;)
            if (p = next_arch(p, &arch), runs_on(&arch, gpu, 0))
                return 2;
    int best = -1;
    if (strcmp(rec->ptx, "-") != 0)
        for (const char *p = rec->ptx; p;) {
            p = next_arch(p, &arch);
            int level = arch.major * 10 + arch.minor;
            if (runs_on(&arch, gpu, 1) && level > best) {
                best = level;
                snprintf(ptx_used, n, "compute_%d%s", level,
                                 arch.suffix == 'a' ? "a" : arch.suffix == 'f' ? "f" : "");
            }
        }
    return best >= 0 ? 1 : 0;
}

/* One finding per device: BA701 when some DLL has no code for it (the JIT-only ones become
 * details of that error), else BA702 when some DLL runs there only through PTX JIT. */
static void check_gpu_code(Doctor *doctor, const Gpu *gpu)
{
    const Data *data = doctor->data;
    char sm[16];
    snprintf(sm, sizeof sm, "sm_%d%d", gpu->major, gpu->minor);
    StrBuf none, jit;
    sb_init(&none);
    sb_init(&jit);
    int *level = xrealloc(NULL, sizeof *level * (data->n_gpus + 1));
    char (*ptx)[32] = xrealloc(NULL, sizeof *ptx * (data->n_gpus + 1));
    for (size_t i = 0; i < data->n_gpus; i++) {
        ptx[i][0] = '\0';
        level[i] = coverage(&data->gpus[i], gpu, ptx[i], sizeof ptx[i]);
        if (level[i] < 2)
            sb_printf(level[i] ? &jit : &none, "%s%s", (level[i] ? jit.len : none.len) ? ", " : "",
                      base_name(data->gpus[i].path));
    }
    Finding *f = NULL;
    if (none.len)
        f = add_finding(doctor, "BA701",
                        xprintf("%s (%s, compute capability %d.%d) has no GPU code in %s: its "
                                "kernels fail there with 'no kernel image is available'",
                                gpu->name, sm, gpu->major, gpu->minor, none.text));
    else if (jit.len)
        f = add_finding(doctor, "BA702",
                        xprintf("on %s (%s) %s runs only JIT-compiled from PTX at first use: a "
                                "slow first start; the driver keeps the result in its JIT cache, "
                                "whose size CUDA_CACHE_MAXSIZE sets (NVIDIA CUDA documentation, "
                                "'CUDA Environment Variables' / 'Just-in-Time Compilation')",
                                gpu->name, sm, jit.text));
    for (size_t i = 0; f && i < data->n_gpus; i++) {
        const GpuRec *rec = &data->gpus[i];
        if (level[i] == 2)
            continue;
        finding_file(f, rec->path);
        finding_detail(f, level[i] ? xprintf("%s: no SASS for %s; the driver JIT-compiles its %s "
                                             "PTX", rec->path, sm, ptx[i])
                                   : xprintf("%s: SASS %s, PTX %s: nothing runs on %s", rec->path,
                                             rec->sass, rec->ptx, sm));
    }
    free(level);
    free(ptx);
    free(none.text);
    free(jit.text);
}

void check_driver_and_gpus(Doctor *doctor)
{
    const Data *data = doctor->data;
    Machine *m = &doctor->machine;
    if (!data->driver_dll)
        return;
    machine_nvidia(m, data->driver_dll);
    if (!m->have_driver) {
        Finding *f = add_finding(doctor, "BA801",
                                 xprintf("%s was not found in System32: no NVIDIA driver is "
                                         "installed; the bundle needs driver %s or newer (CUDA %d)",
                                         data->driver_dll, data->driver_min, data->cuda_major));
        finding_file(f, data->driver_dll);
        return;
    }
    check_driver_versions(doctor, data->driver_dll);
    if (m->gpu_problem) {
        Finding *f = add_finding(doctor, "BA803", xstrdup(m->gpu_problem));
        finding_file(f, data->driver_dll);
    }
    for (size_t i = 0; i < m->n_gpus; i++)
        if (m->gpus[i].major > 0)
            check_gpu_code(doctor, &m->gpus[i]);
}

/* --- 4. shadowing -------------------------------------------------------------------------- */

/* The DLL names in HKLM\...\Session Manager\KnownDLLs: for these Windows maps its own System32
 * copy, whatever folder the process asks for. */
static int is_known_dll(const char *name)
{
    HKEY key;
    if (RegOpenKeyExW(HKEY_LOCAL_MACHINE,
                      L"SYSTEM\\CurrentControlSet\\Control\\Session Manager\\KnownDLLs", 0,
                      KEY_READ, &key) != ERROR_SUCCESS)
        return 0;
    wchar_t *wide = widen(name);
    int found = 0;
    for (DWORD i = 0; !found; i++) {
        wchar_t value[256], text[MAX_PATH];
        DWORD value_len = 256, text_len = sizeof text - sizeof(wchar_t), type = 0;
        LONG status = RegEnumValueW(key, i, value, &value_len, NULL, &type, (BYTE *)text, &text_len);
        if (status == ERROR_MORE_DATA)
            continue;
        if (status != ERROR_SUCCESS)
            break;
        text[text_len / sizeof(wchar_t)] = L'\0';
        found = type == REG_SZ && _wcsicmp(text, wide) == 0;
    }
    free(wide);
    RegCloseKey(key);
    return found;
}

static void shadow_place(Finding **finding, Doctor *doctor, const VersionRec *rec,
                         const wchar_t *path, const char *where)
{
    char version[64];
    if (!is_file(path))
        return;
    if (!file_version(path, version, sizeof version))
        strcpy(version, "no version");
    else if (same_version(version, rec->version))
        return;
    char *place = narrow(path);
    if (!*finding) {
        *finding = add_finding(doctor, "BA804",
                               xprintf("another %s is on this machine: %s has %s, the bundle %s",
                                       base_name(rec->path), where, version, rec->version));
        finding_file(*finding, rec->path);
    }
    finding_detail(*finding, xprintf("%s: %s (%s)", where, version, place));
    free(place);
}

/* The folders of PATH, in order: split at ';', surrounding quotes stripped, trailing '\'
 * trimmed (a drive root keeps its own), empty entries left out. Both the array and the
 * folders are malloc'ed; free with free_folders. */
static wchar_t **path_folders(size_t *count)
{
    wchar_t **folders = NULL;
    *count = 0;
    DWORD n = GetEnvironmentVariableW(L"PATH", NULL, 0);
    if (!n)
        return NULL;
    wchar_t *path = xrealloc(NULL, n * sizeof(wchar_t));
    GetEnvironmentVariableW(L"PATH", path, n);
    for (wchar_t *next, *folder = path; folder; folder = next) {
        next = wcschr(folder, L';');
        if (next)
            *next++ = L'\0';
        if (*folder == L'"') {
            folder++;
            wchar_t *quote = wcschr(folder, L'"');
            if (quote)
                *quote = L'\0';
        }
        size_t len = wcslen(folder);
        while (len > 3 && folder[len - 1] == L'\\')
            folder[--len] = L'\0';
        if (len)
            *GROW(folders, *count) = _wcsdup(folder);
    }
    free(path);
    return folders;
}

static void free_folders(wchar_t **folders, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(folders[i]);
    free(folders);
}

/* A PATH folder that is the bundle folder or System32 is not looked at again as a PATH folder:
 * the first is the bundle's own, the second has its own part in both checks. */
static int other_path_folder(const Doctor *doctor, const wchar_t *folder)
{
    return _wcsicmp(folder, doctor->data->folder) != 0 && _wcsicmp(folder, system_folder()) != 0;
}

static void shadow_path_folders(Finding **finding, Doctor *doctor, const VersionRec *rec)
{
    size_t n = 0;
    wchar_t **folders = path_folders(&n);
    for (size_t i = 0; i < n; i++) {
        if (!other_path_folder(doctor, folders[i]))
            continue;
        wchar_t *candidate = join(folders[i], base_name(rec->path));
        shadow_place(finding, doctor, rec, candidate, "a PATH folder");
        free(candidate);
    }
    free_folders(folders, n);
}

/* The app folder comes before System32 and PATH in the search order, so another copy there
 * bites when something loads the DLL by name before the app's copy is loaded, or always for a
 * KnownDLL. The VC++ runtime is left out of the System32/PATH part: another copy in System32 is
 * normal there, and its floor is BA805's business. */
void check_shadowing(Doctor *doctor)
{
    const Data *data = doctor->data;
    for (size_t i = 0; i < data->n_versions; i++) {
        const VersionRec *rec = &data->versions[i];
        const char *name = base_name(rec->path);
        Finding *finding = NULL;
        wchar_t *system_copy = join(system_folder(), name);
        int known = is_known_dll(name);
        if (known || !data_is_vc_runtime(data, name))
            shadow_place(&finding, doctor, rec, system_copy, "System32");
        if (known && finding) {
            char *message = xprintf("%s; KnownDLLs lists %s, so Windows loads System32's copy "
                                    "even over the one in the app folder", finding->message, name);
            free(finding->message);
            finding->message = message;
        }
        if (!data_is_vc_runtime(data, name))
            shadow_path_folders(&finding, doctor, rec);
        free(system_copy);
    }
}

/* --- 4b. pruned DLLs on the search path --------------------------------------------------- */

/* A DLL `bundle build --model` left out because the app's models never load it. If the app
 * (or ORT, for a model it was not built for) loads it after all, LoadLibrary does not fail
 * with 126: it takes the first copy on the search path, System32's or a PATH folder's, a
 * foreign build of another version (for a cuDNN sub-library: mixed cuDNN versions in one
 * process). One finding per name; every copy found is a detail, in search order. */
void check_pruned(Doctor *doctor)
{
    const Data *data = doctor->data;
    if (!data->n_pruned)
        return;
    size_t n_folders = 0;
    wchar_t **folders = path_folders(&n_folders);
    for (size_t i = 0; i < data->n_pruned; i++) {
        const char *name = data->pruned[i];
        char **found = NULL;
        size_t n_found = 0;
        for (size_t f = 0; f <= n_folders; f++) { /* System32 first, then PATH in its order */
            const wchar_t *folder = f == 0 ? system_folder() : folders[f - 1];
            if (f > 0 && !other_path_folder(doctor, folder))
                continue;
            wchar_t *candidate = join(folder, name);
            if (is_file(candidate)) {
                char *shown = narrow(candidate);
                int seen = 0; /* PATH may list one folder twice */
                for (size_t k = 0; k < n_found && !seen; k++)
                    seen = _stricmp(found[k], shown) == 0;
                if (seen)
                    free(shown);
                else
                    *GROW(found, n_found) = shown;
            }
            free(candidate);
        }
        if (n_found) {
            Finding *finding = add_finding(
                doctor, "BA808",
                xprintf("%s: the bundle left it out for its models, but %s is on the search "
                        "path: if the app ever loads it, it gets that foreign copy",
                        name, found[0]));
            finding_file(finding, name);
            for (size_t k = 0; k < n_found; k++)
                finding_detail(finding, found[k]); /* takes ownership */
        }
        free(found);
    }
    free_folders(folders, n_folders);
}

/* --- 5. VC++ runtime ----------------------------------------------------------------------- */

static void vc_floor(Doctor *doctor, const wchar_t *path, const char *shown, const char *where)
{
    const Data *data = doctor->data;
    char version[64];
    Finding *f = NULL;
    if (!is_file(path))
        f = add_finding(doctor, "BA805",
                        xprintf("%s has no %s: the Visual C++ runtime (%s or newer) is not "
                                "installed; run vc_redist.x64.exe (the installer does)",
                                where, base_name(shown), data->vc_min));
    /* a version that cannot be read is not judged: Windows' copies always carry one (Wine's
     * GetFileVersionInfo answers for its builtin runtime DLLs without one) */
    else if (file_version(path, version, sizeof version) && version_below(version, data->vc_min))
        f = add_finding(doctor, "BA805",
                        xprintf("%s's %s is %s, below the floor %s of the bundle's DLLs", where,
                                base_name(shown), version, data->vc_min));
    if (f)
        finding_file(f, shown);
}

/* The VC++ runtime DLLs the bundle's DLLs import (each once): with vc_runtime = installer,
 * vc_redist.x64.exe must have put them in System32. */
static void vc_imports(const Data *data, char ***needed, size_t *n_needed)
{
    for (size_t i = 0; i < data->n_imports; i++) {
        if (strcmp(data->imports[i].names, "-") == 0)
            continue;
        char *names = xstrdup(data->imports[i].names);
        for (char *next, *name = names; name; name = next) {
            next = strchr(name, ',');
            if (next)
                *next++ = '\0';
            int seen = !data_is_vc_runtime(data, name);
            for (size_t k = 0; k < *n_needed && !seen; k++)
                seen = _stricmp((*needed)[k], name) == 0;
            if (!seen)
                *GROW(*needed, *n_needed) = xstrdup(name);
        }
        free(names);
    }
}

void check_vc_runtime(Doctor *doctor)
{
    const Data *data = doctor->data;
    if (!data->vc_mode || strcmp(data->vc_min, "-") == 0)
        return;
    if (strcmp(data->vc_mode, "installer") == 0) {
        char **needed = NULL;
        size_t n_needed = 0;
        vc_imports(data, &needed, &n_needed);
        for (size_t i = 0; i < n_needed; i++) {
            wchar_t *path = join(system_folder(), needed[i]);
            vc_floor(doctor, path, needed[i], "System32");
            free(path);
            free(needed[i]);
        }
        free(needed);
        return;
    }
    for (size_t i = 0; i < data->n_files; i++) {
        const char *path = data->files[i].path;
        if (!data_is_vc_runtime(data, base_name(path)))
            continue;
        wchar_t *full = bundle_path(data, path);
        if (is_file(full)) /* absent: BA402 says so */
            vc_floor(doctor, full, path, "the bundle");
        free(full);
    }
}

/* --- 6./7. load proof and ORT's version ---------------------------------------------------- */

static const ImportsRec *imports_of(const Data *data, const char *name)
{
    for (size_t i = 0; i < data->n_imports; i++)
        if (_stricmp(base_name(data->imports[i].path), name) == 0)
            return &data->imports[i];
    return NULL;
}

/* Windows provides `name`: an API set, a file in System32, or a DLL the loader finds there. */
static int system_provides(const Data *data, const char *name)
{
    if (data_is_api_set(data, name))
        return 1;
    wchar_t *path = join(system_folder(), name);
    int found = is_file(path);
    free(path);
    if (found)
        return 1;
    wchar_t *wide = widen(name);
    HMODULE module = LoadLibraryExW(wide, NULL, LOAD_LIBRARY_AS_DATAFILE | LOAD_LIBRARY_SEARCH_SYSTEM32);
    free(wide);
    if (module)
        FreeLibrary(module);
    return module != NULL;
}

/* Breadth-first through the recorded imports from `root`: every DLL neither in the bundle
 * folder nor provided by Windows, each with its chain "root -> a.dll -> missing.dll". The
 * first one found (the shortest chain) goes into the message, all of them into the details. */
static void missing_imports(Doctor *doctor, const char *root, Finding *finding)
{
    const Data *data = doctor->data;
    typedef struct {
        char *name;
        int parent;
    } Node;
    Node *queue = NULL;
    size_t n = 0;
    *GROW(queue, n) = (Node){xstrdup(base_name(root)), -1};
    char *first = NULL;
    for (size_t head = 0; head < n; head++) {
        const ImportsRec *rec = imports_of(data, queue[head].name);
        if (!rec || strcmp(rec->names, "-") == 0)
            continue;
        char *names = xstrdup(rec->names);
        for (char *next, *name = names; name; name = next) {
            next = strchr(name, ',');
            if (next)
                *next++ = '\0';
            int seen = 0;
            for (size_t i = 0; i < n && !seen; i++)
                seen = _stricmp(queue[i].name, name) == 0;
            if (seen)
                continue;
            wchar_t *here = join(data->folder, name);
            int present = is_file(here);
            free(here);
            if (present) { /* walked in its turn */
                *GROW(queue, n) = (Node){xstrdup(name), (int)head};
                continue;
            }
            if (system_provides(data, name))
                continue;
            char *chain = xstrdup(name);
            for (int at = (int)head; at >= 0; at = queue[at].parent) {
                char *longer = xprintf("%s -> %s", queue[at].name, chain);
                free(chain);
                chain = longer;
            }
            if (!first)
                first = xprintf("%s is missing (%s)", name, chain);
            finding_file(finding, name);
            finding_detail(finding, chain);
        }
        free(names);
    }
    char *message = xprintf("%s: %s", finding->message,
                            first ? first
                                  : "every DLL it imports was found; one they load in turn, or a "
                                    "system DLL, is missing");
    free(finding->message);
    finding->message = message;
    free(first);
    for (size_t i = 0; i < n; i++)
        free(queue[i].name);
    free(queue);
}

static char *win32_message(DWORD error)
{
    wchar_t *text = NULL;
    DWORD n = FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM |
                                 FORMAT_MESSAGE_IGNORE_INSERTS,
                             NULL, error, MAKELANGID(LANG_ENGLISH, SUBLANG_ENGLISH_US), (wchar_t *)&text, 0, NULL);
    if (!n)
        n = FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM |
                               FORMAT_MESSAGE_IGNORE_INSERTS,
                           NULL, error, 0, (wchar_t *)&text, 0, NULL);
    if (!n || !text)
        return xstrdup("no message");
    while (n && (text[n - 1] == L'\r' || text[n - 1] == L'\n' || text[n - 1] == L' ' || text[n - 1] == L'.'))
        text[--n] = L'\0';
    char *utf8 = narrow(text);
    LocalFree(text);
    return utf8;
}

typedef struct {
    const void *(WINAPI *GetApi)(unsigned int version);
    const char *(WINAPI *GetVersionString)(void);
} OrtApiBase;

/* Whether `folder` is the folder of this exe (the app's exe sits beside the doctor). */
static int is_own_folder(const wchar_t *folder)
{
    wchar_t exe[MAX_PATH * 4];
    DWORD n = GetModuleFileNameW(NULL, exe, MAX_PATH * 4);
    wchar_t *slash = n && n < MAX_PATH * 4 ? wcsrchr(exe, L'\\') : NULL;
    if (!slash)
        return 0;
    *slash = L'\0';
    return _wcsicmp(exe, folder) == 0;
}

/* The ORT DLL loaded the way the app loads it: by its name, so that the normal search order
 * decides (a copy already loaded or listed in KnownDLLs, then the exe's folder, System32, the
 * Windows folders, the current folder, PATH), not the bundle's full path. With --data naming
 * another folder than the doctor's own, that folder is searched right after the doctor's
 * (SetDllDirectoryW), where the app's own folder would be. Records where it came from. */
static HMODULE load_ort_by_name(Doctor *doctor, const char *relative)
{
    const char *slash = strrchr(relative, '/');
    wchar_t *name = widen(slash ? slash + 1 : relative);
    int other = !is_own_folder(doctor->data->folder);
    if (other)
        SetDllDirectoryW(doctor->data->folder);
    HMODULE module = LoadLibraryW(name);
    DWORD error = GetLastError();
    if (other)
        SetDllDirectoryW(NULL);
    free(name);
    if (module) {
        wchar_t from[MAX_PATH * 4];
        DWORD n = GetModuleFileNameW(module, from, MAX_PATH * 4);
        doctor->ort_from = n && n < MAX_PATH * 4 ? narrow(from) : xstrdup("an unknown path");
    }
    SetLastError(error);
    return module;
}

/* Whether the ORT loaded is the bundle's own file (its full path, compared folded). */
static int ort_is_bundled(const Doctor *doctor, const char *relative)
{
    wchar_t *own = bundle_path(doctor->data, relative);
    wchar_t *from = widen(doctor->ort_from);
    int same = _wcsicmp(own, from) == 0;
    free(own);
    free(from);
    return same;
}

static void check_ort_version(Doctor *doctor, HMODULE ort, const char *path)
{
    const char *want = doctor->data->ort;
    const OrtApiBase *(WINAPI *get_base)(void) =
        (const OrtApiBase *(WINAPI *)(void))(void *)GetProcAddress(ort, "OrtGetApiBase");
    const OrtApiBase *base = get_base ? get_base() : NULL;
    const char *have = base && base->GetVersionString ? base->GetVersionString() : NULL;
    char *where = ort_is_bundled(doctor, path)
                      ? xstrdup(path)
                      : xprintf("%s (loaded by name, as the app loads it, from %s)", path,
                                doctor->ort_from);
    Finding *f = NULL;
    doctor->ort_loaded = have ? xstrdup(have) : NULL;
    if (!have)
        f = add_finding(doctor, "BA807",
                        xprintf("%s has no OrtGetApiBase()->GetVersionString(): not an ONNX "
                                "Runtime DLL; the bundle expects ONNX Runtime %s", where, want));
    else if (strcmp(have, want) != 0)
        f = add_finding(doctor, "BA807",
                        xprintf("%s is ONNX Runtime %s; the bundle was built for %s", where, have, want));
    if (f)
        finding_file(f, path);
    free(where);
}

/* The first load record is the ORT DLL: missing from the folder, the app still gets whatever
 * the search order finds by its name (a System32 copy), and the doctor says which. */
static void check_ort(Doctor *doctor, const char *relative, int present)
{
    doctor->ort_asked = 1;
    HMODULE module = load_ort_by_name(doctor, relative);
    if (module) {
        check_ort_version(doctor, module, relative);
    } else if (present) {
        DWORD error = GetLastError();
        char *text = win32_message(error);
        Finding *f = add_finding(doctor, "BA806", xprintf("%s does not load: error %lu (%s)",
                                                          relative, error, text));
        free(text);
        finding_file(f, relative);
        if (error == ERROR_MOD_NOT_FOUND)
            missing_imports(doctor, relative, f);
    }
}

void check_loads(Doctor *doctor)
{
    const Data *data = doctor->data;
    for (size_t i = 0; i < data->n_loads; i++) {
        const char *rel = data->loads[i];
        if (in_absent_pack(data, rel))
            continue;
        wchar_t *path = bundle_path(data, rel);
        int present = is_file(path);
        if (!present) {
            Finding *f = add_finding(doctor, "BA806",
                                     xprintf("%s is missing from the folder (error 126, "
                                             "ERROR_MOD_NOT_FOUND, when it is loaded)", rel));
            finding_file(f, rel);
        }
        if (i == 0 && data->ort) {
            check_ort(doctor, rel, present);
            free(path);
            continue;
        }
        if (!present) {
            free(path);
            continue;
        }
        HMODULE module = LoadLibraryExW(path, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
        if (!module) {
            DWORD error = GetLastError();
            char *text = win32_message(error);
            Finding *f = add_finding(doctor, "BA806",
                                     xprintf("%s does not load: error %lu (%s)", rel, error, text));
            free(text);
            finding_file(f, rel);
            if (error == ERROR_MOD_NOT_FOUND)
                missing_imports(doctor, rel, f);
        }
        free(path);
    }
}
