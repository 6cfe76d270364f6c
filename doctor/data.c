/* The data file, version 1 (doctor/README.md has the format). Read whole (it is small),
 * its digest checked first, then every record validated: the doctor trusts what it read, so
 * nothing half-valid gets past this file. SHA-256 comes from CNG (bcrypt.dll), part of every
 * Windows since Vista. */
#include "doctor.h"

#include <bcrypt.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DATA_BYTES (64u << 20)
#define HEADER "bundle-doctor-data\t2"
#define REBUILD "rebuild the bundle with bundle build"

/* --- SHA-256 ------------------------------------------------------------------------------ */

typedef struct {
    BCRYPT_ALG_HANDLE alg;
    BCRYPT_HASH_HANDLE hash;
} Sha;

static unsigned long sha_open(Sha *sha)
{
    sha->alg = NULL;
    sha->hash = NULL;
    NTSTATUS status = BCryptOpenAlgorithmProvider(&sha->alg, BCRYPT_SHA256_ALGORITHM, NULL, 0);
    if (status < 0)
        return (unsigned long)status;
    status = BCryptCreateHash(sha->alg, &sha->hash, NULL, 0, NULL, 0, 0);
    if (status < 0) {
        BCryptCloseAlgorithmProvider(sha->alg, 0);
        return (unsigned long)status;
    }
    return 0;
}

static unsigned long sha_close(Sha *sha, char out[65])
{
    unsigned char digest[32];
    NTSTATUS status = BCryptFinishHash(sha->hash, digest, sizeof digest, 0);
    BCryptDestroyHash(sha->hash);
    BCryptCloseAlgorithmProvider(sha->alg, 0);
    if (status < 0)
        return (unsigned long)status;
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[64] = '\0';
    return 0;
}

unsigned long sha256_buffer(const void *bytes, size_t n, char out[65])
{
    Sha sha;
    unsigned long error = sha_open(&sha);
    if (error)
        return error;
    const unsigned char *p = bytes;
    while (n) {
        ULONG chunk = n > (1u << 30) ? (1u << 30) : (ULONG)n;
        BCryptHashData(sha.hash, (PUCHAR)p, chunk, 0);
        p += chunk;
        n -= chunk;
    }
    return sha_close(&sha, out);
}

/* Streams the file in 1 MiB chunks: the largest bundled DLLs are ~700 MB. */
unsigned long sha256_file(const wchar_t *path, char out[65])
{
    HANDLE file = CreateFileW(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, NULL,
                              OPEN_EXISTING, FILE_FLAG_SEQUENTIAL_SCAN, NULL);
    if (file == INVALID_HANDLE_VALUE)
        return GetLastError();
    Sha sha;
    unsigned long error = sha_open(&sha);
    if (error) {
        CloseHandle(file);
        return error;
    }
    enum { CHUNK = 1 << 20 };
    unsigned char *buffer = xrealloc(NULL, CHUNK);
    DWORD got;
    for (;;) {
        if (!ReadFile(file, buffer, CHUNK, &got, NULL)) {
            error = GetLastError();
            break;
        }
        if (got == 0)
            break;
        BCryptHashData(sha.hash, buffer, got, 0);
    }
    free(buffer);
    CloseHandle(file);
    char digest[65];
    unsigned long finish = sha_close(&sha, digest);
    if (error || finish)
        return error ? error : finish;
    memcpy(out, digest, 65);
    return 0;
}

/* --- validation helpers ------------------------------------------------------------------ */

static int all_digits(const char *text)
{
    if (!*text)
        return 0;
    for (; *text; text++)
        if (*text < '0' || *text > '9')
            return 0;
    return 1;
}

static int is_hex64(const char *text)
{
    size_t n = 0;
    for (; text[n]; n++)
        if (!((text[n] >= '0' && text[n] <= '9') || (text[n] >= 'a' && text[n] <= 'f')))
            return 0;
    return n == 64;
}

/* `parts` dot-separated decimal numbers (parts 0: one or more) */
static int is_dotted(const char *text, int parts)
{
    int count = 1, digits = 0;
    for (; *text; text++) {
        if (*text == '.') {
            if (!digits)
                return 0;
            count++;
            digits = 0;
        } else if (*text >= '0' && *text <= '9') {
            digits++;
        } else {
            return 0;
        }
    }
    return digits && (parts == 0 || count == parts);
}

/* relative, '/'-separated, inside the folder: no drive, no '\', no empty, '.' or '..' part */
static int is_relative_path(const char *path)
{
    if (!*path || strpbrk(path, "\\:*?\"<>|"))
        return 0;
    const char *part = path;
    for (;;) {
        const char *slash = strchr(part, '/');
        size_t n = slash ? (size_t)(slash - part) : strlen(part);
        if (n == 0 || (n == 1 && part[0] == '.') || (n == 2 && part[0] == '.' && part[1] == '.'))
            return 0;
        if (!slash)
            return 1;
        part = slash + 1;
    }
}

/* "-" or a comma list of sm_XY / compute_XY with an optional 'a' or 'f' suffix */
static int is_arch_list(const char *text)
{
    if (strcmp(text, "-") == 0)
        return 1;
    const char *p = text;
    for (;;) {
        if (strncmp(p, "sm_", 3) == 0)
            p += 3;
        else if (strncmp(p, "compute_", 8) == 0)
            p += 8;
        else
            return 0;
        int digits = 0;
        while (*p >= '0' && *p <= '9') {
            p++;
            digits++;
        }
        if (digits < 2 || digits > 3)
            return 0;
        if (*p == 'a' || *p == 'f')
            p++;
        if (*p == '\0')
            return 1;
        if (*p++ != ',')
            return 0;
    }
}

/* a plain file name: no folder, no drive, no wildcard, not '.' or '..' */
static int is_file_name(const char *name)
{
    return *name && !strpbrk(name, "\\/:*?\"<>|") && strcmp(name, ".") != 0 &&
           strcmp(name, "..") != 0;
}

static int is_name_list(const char *text)
{
    if (!*text)
        return 0;
    for (const char *p = text; *p; p++)
        if (*p == '/' || *p == '\\' || *p == ':' || (*p == ',' && (p[1] == ',' || p[1] == '\0')) ||
            (p == text && *p == ','))
            return 0;
    return 1;
}

/* --- records ------------------------------------------------------------------------------ */

enum Kind {
    TOOL = 1, PROFILE, ORT, VC_RUNTIME, VC_DLL, API_SET, DRIVER, CHECK, FILE_, VERSION, LOAD,
    PRUNED, IMPORTS, GPU, EP, RUNTIME_PACK
};

static const struct {
    const char *name;
    int fields; /* including the kind */
    int once;   /* may appear at most once */
} KINDS[] = {
    [TOOL] = {"tool", 2, 1},         [PROFILE] = {"profile", 2, 1}, [ORT] = {"ort", 2, 1},
    [VC_RUNTIME] = {"vc_runtime", 3, 1}, [VC_DLL] = {"vc_dll", 2, 0},
    [API_SET] = {"api_set", 2, 0},   [DRIVER] = {"driver", 4, 1}, [CHECK] = {"check", 5, 0},
    [FILE_] = {"file", 5, 0},        [VERSION] = {"version", 3, 0}, [LOAD] = {"load", 2, 0},
    [PRUNED] = {"pruned", 2, 0},     [IMPORTS] = {"imports", 3, 0}, [GPU] = {"gpu", 4, 0},
    [EP] = {"ep", 9, 0},             [RUNTIME_PACK] = {"runtime_pack", 2, 1},
};
#define N_KINDS ((int)(sizeof KINDS / sizeof KINDS[0]))
/* The ep record's name before issue 39, written by an older bundle: still read as one. */
#define OLD_EP_NAME "pack"

static const char *const PROBES[] = {"nvidia-cuda", "intel", "d3d12"};

/* An ep record (an execution-provider pack): name, folder, plugin (inside the folder), probe,
 * minimum compute capability and driver ("-": none), what the EP needs, in words, and the
 * oldest ONNX Runtime release it registers with (format 2). */
static char *take_ep(Data *data, char **f)
{
    size_t folder = strlen(f[2]);
    if (!*f[1] || strpbrk(f[1], "/\\: "))
        return xprintf("'%s' is not an EP name (e.g. nv-tensorrt-rtx)", f[1]);
    for (size_t i = 0; i < data->n_packs; i++)
        if (strcmp(data->packs[i].name, f[1]) == 0)
            return xprintf("a second ep record for %s", f[1]);
    if (!is_relative_path(f[2]) || !is_relative_path(f[3]) || strncmp(f[3], f[2], folder) != 0 ||
        f[3][folder] != '/')
        return xprintf("the EP %s needs a relative folder and a plugin path inside it", f[1]);
    int probe = -1;
    for (int i = 0; i < (int)(sizeof PROBES / sizeof PROBES[0]); i++)
        if (strcmp(f[4], PROBES[i]) == 0)
            probe = i;
    if (probe < 0)
        return xprintf("the probe '%s' of the EP %s is not nvidia-cuda, intel or d3d12", f[4],
                       f[1]);
    if ((strcmp(f[5], "-") != 0 && !is_dotted(f[5], 2)) ||
        (strcmp(f[6], "-") != 0 && !is_dotted(f[6], 2)))
        return xprintf("the EP %s's minimum compute capability and driver are X.Y or -", f[1]);
    if (!*f[7])
        return xprintf("the EP %s says nothing about what it needs", f[1]);
    if (!is_dotted(f[8], 0))
        return xprintf("the EP %s's minimum ONNX Runtime '%s' is not a dotted version", f[1], f[8]);
    *GROW(data->packs, data->n_packs) =
        (PackRec){xstrdup(f[1]), xstrdup(f[2]), xstrdup(f[3]), PROBES[probe], xstrdup(f[5]),
                  xstrdup(f[6]), xstrdup(f[7]), xstrdup(f[8])};
    return NULL;
}

/* One record's fields (already split); returns NULL when valid, else what is wrong. */
static char *take_record(Data *data, int kind, char **f)
{
    switch (kind) {
    case TOOL:
        data->tool = xstrdup(f[1]);
        return NULL;
    case PROFILE:
        data->profile = xstrdup(f[1]);
        return NULL;
    case ORT:
        if (!is_dotted(f[1], 0))
            return xprintf("the ORT version '%s' is not a dotted version", f[1]);
        data->ort = xstrdup(f[1]);
        return NULL;
    case VC_RUNTIME:
        if (strcmp(f[1], "app-local") != 0 && strcmp(f[1], "installer") != 0)
            return xprintf("the VC++ runtime mode '%s' is neither app-local nor installer", f[1]);
        if (strcmp(f[2], "-") != 0 && !is_dotted(f[2], 0))
            return xprintf("the VC++ runtime floor '%s' is not a version or -", f[2]);
        data->vc_mode = xstrdup(f[1]);
        data->vc_min = xstrdup(f[2]);
        return NULL;
    case VC_DLL:
        if (!is_file_name(f[1]))
            return xprintf("'%s' is not a plain DLL file name (a vc_dll record)", f[1]);
        *GROW(data->vc_dlls, data->n_vc_dlls) = xstrdup(f[1]);
        return NULL;
    case API_SET:
        if (!*f[1] || strpbrk(f[1], "/\\: "))
            return xprintf("'%s' is not an API set name prefix (e.g. api-ms-)", f[1]);
        *GROW(data->api_sets, data->n_api_sets) = xstrdup(f[1]);
        return NULL;
    case DRIVER:
        if (!*f[1] || strpbrk(f[1], "/\\:") || !all_digits(f[2]) || strlen(f[2]) > 3 ||
            !is_dotted(f[3], 2))
            return xstrdup("a driver record is DLL, CUDA major, minimum driver (e.g. 527.41)");
        data->driver_dll = xstrdup(f[1]);
        data->cuda_major = atoi(f[2]);
        data->driver_min = xstrdup(f[3]);
        return NULL;
    case CHECK: {
        if (!*f[1] || !*f[3] || !*f[4])
            return xstrdup("a check record needs a code, a severity, a name and a title");
        if (strcmp(f[2], "error") != 0 && strcmp(f[2], "warning") != 0 && strcmp(f[2], "info") != 0)
            return xprintf("the severity '%s' is not error, warning or info", f[2]);
        CheckRow *row = GROW(data->checks, data->n_checks);
        *row = (CheckRow){xstrdup(f[1]), xstrdup(f[2]), xstrdup(f[3]), xstrdup(f[4])};
        return NULL;
    }
    case FILE_: {
        if (!all_digits(f[1]) || strlen(f[1]) > 15)
            return xprintf("the size '%s' is not a number of bytes", f[1]);
        if (!is_hex64(f[2]))
            return xstrdup("the SHA-256 is not 64 lowercase hex digits");
        if (!*f[3] || !is_relative_path(f[4]))
            return xprintf("'%s' is not a path relative to the bundle folder", f[4]);
        FileRec *file = GROW(data->files, data->n_files);
        file->size = strtoull(f[1], NULL, 10);
        memcpy(file->sha256, f[2], 65);
        file->kind = xstrdup(f[3]);
        file->path = xstrdup(f[4]);
        return NULL;
    }
    case VERSION:
        if (!is_relative_path(f[1]) || !is_dotted(f[2], 4))
            return xstrdup("a version record is a relative path and a version a.b.c.d");
        *GROW(data->versions, data->n_versions) = (VersionRec){xstrdup(f[1]), xstrdup(f[2])};
        return NULL;
    case LOAD:
        if (!is_relative_path(f[1]))
            return xprintf("'%s' is not a path relative to the bundle folder", f[1]);
        *GROW(data->loads, data->n_loads) = xstrdup(f[1]);
        return NULL;
    case PRUNED:
        if (!is_file_name(f[1]))
            return xprintf("'%s' is not a plain DLL file name (a pruned record names no folder)",
                           f[1]);
        *GROW(data->pruned, data->n_pruned) = xstrdup(f[1]);
        return NULL;
    case IMPORTS:
        if (!is_relative_path(f[1]) || (strcmp(f[2], "-") != 0 && !is_name_list(f[2])))
            return xstrdup("an imports record is a relative path and a comma list of DLL names");
        *GROW(data->imports, data->n_imports) = (ImportsRec){xstrdup(f[1]), xstrdup(f[2])};
        return NULL;
    case GPU:
        if (!is_relative_path(f[1]) || !is_arch_list(f[2]) || !is_arch_list(f[3]))
            return xstrdup("a gpu record is a relative path, a SASS list and a PTX list "
                           "(sm_XY[a|f],... or -)");
        *GROW(data->gpus, data->n_gpus) = (GpuRec){xstrdup(f[1]), xstrdup(f[2]), xstrdup(f[3])};
        return NULL;
    case EP:
        return take_ep(data, f);
    case RUNTIME_PACK: /* the hash bundle-pack.txt must name (bundler/lock.py's RuntimePack) */
        if (!is_hex64(f[1]))
            return xstrdup("the runtime pack's SHA-256 is not 64 lowercase hex digits");
        data->runtime_pack = xstrdup(f[1]);
        return NULL;
    }
    return xstrdup("internal error: unhandled record kind");
}

/* Splits one line (NUL-terminated, no LF) at TABs into at most MAX_FIELDS fields (the ep
 * record's 9); returns the count, MAX_FIELDS + 1 for a line with more. */
#define MAX_FIELDS 9
static int split(char *line, char **fields)
{
    int n = 0;
    fields[n++] = line;
    for (char *p = line; *p; p++) {
        if (*p == '\t') {
            *p = '\0';
            if (n == MAX_FIELDS)
                return MAX_FIELDS + 1; /* too many: never a valid record */
            fields[n++] = p + 1;
        }
    }
    return n;
}

static char *parse_records(Data *data, char *text, size_t n)
{
    int last = 0, line_no = 1;
    int seen[N_KINDS] = {0};
    char *line = text;
    char *end = text + n;
    /* the header line was checked by the caller */
    line = memchr(line, '\n', n) + 1;
    while (line < end) {
        char *lf = memchr(line, '\n', (size_t)(end - line));
        *lf = '\0';
        line_no++;
        char *f[MAX_FIELDS + 1];
        int count = split(line, f);
        int kind = 0;
        for (int k = 1; k < N_KINDS; k++)
            if (strcmp(f[0], KINDS[k].name) == 0)
                kind = k;
        if (strcmp(f[0], OLD_EP_NAME) == 0)
            kind = EP;
        if (!kind)
            return xprintf("line %d: unknown record '%s' (written by a newer bundle?); %s", line_no,
                           f[0], REBUILD);
        if (count != KINDS[kind].fields)
            return xprintf("line %d: a %s record has %d TAB-separated fields, not %d; %s", line_no,
                           f[0], count, KINDS[kind].fields, REBUILD);
        if (kind < last)
            return xprintf("line %d: a %s record after a %s record (out of order); %s", line_no,
                           f[0], KINDS[last].name, REBUILD);
        if (KINDS[kind].once && seen[kind])
            return xprintf("line %d: a second %s record; %s", line_no, f[0], REBUILD);
        seen[kind] = 1;
        last = kind;
        char *problem = take_record(data, kind, f);
        if (problem) {
            char *full = xprintf("line %d: %s; %s", line_no, problem, REBUILD);
            free(problem);
            return full;
        }
        line = lf + 1;
    }
    if (!data->tool || !data->profile)
        return xprintf("no %s record; %s", data->tool ? "profile" : "tool", REBUILD);
    return NULL;
}

static char *read_all(const wchar_t *file, char **text, size_t *n)
{
    HANDLE handle = CreateFileW(file, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, NULL,
                                OPEN_EXISTING, 0, NULL);
    if (handle == INVALID_HANDLE_VALUE) {
        DWORD error = GetLastError();
        if (error == ERROR_FILE_NOT_FOUND || error == ERROR_PATH_NOT_FOUND)
            return xprintf("not found; it ships next to bundle-doctor.exe: %s", REBUILD);
        return xprintf("cannot be read (error %lu); %s", error, REBUILD);
    }
    LARGE_INTEGER size;
    if (!GetFileSizeEx(handle, &size) || size.QuadPart > MAX_DATA_BYTES) {
        CloseHandle(handle);
        return xprintf("is not a data file of bundle-doctor (over %u MiB); %s",
                       MAX_DATA_BYTES >> 20, REBUILD);
    }
    *n = (size_t)size.QuadPart;
    *text = xrealloc(NULL, *n + 1);
    DWORD got = 0;
    BOOL ok = ReadFile(handle, *text, (DWORD)*n, &got, NULL);
    CloseHandle(handle);
    if (!ok || got != *n)
        return xprintf("cannot be read (error %lu); %s", GetLastError(), REBUILD);
    (*text)[*n] = '\0';
    return NULL;
}

static char *parse(Data *data, char *text, size_t n)
{
    size_t header = strlen(HEADER);
    if (n < header + 1 || memcmp(text, HEADER "\n", header + 1) != 0 || memchr(text, '\0', n))
        return xprintf("the first line is not 'bundle-doctor-data<TAB>2' (not a data file of "
                       "this bundle-doctor); %s", REBUILD);
    /* the last line (an optional final LF aside) must be "end<TAB><sha256 of all before it>" */
    size_t stop = n;
    if (stop && text[stop - 1] == '\n')
        stop--;
    size_t start = stop;
    while (start && text[start - 1] != '\n')
        start--;
    if (stop - start != 68 || memcmp(text + start, "end\t", 4) != 0)
        return xprintf("no 'end' line at the end: the file was truncated or edited; %s", REBUILD);
    char want[65], got[65];
    memcpy(want, text + start + 4, 64);
    want[64] = '\0';
    unsigned long error = sha256_buffer(text, start, got);
    if (error)
        return xprintf("cannot compute SHA-256 (CNG error 0x%08lx)", error);
    if (strcmp(want, got) != 0)
        return xprintf("its digest does not match (the file was edited or truncated); %s", REBUILD);
    return parse_records(data, text, start);
}

int data_load(const wchar_t *file, Data *data, char **problem)
{
    memset(data, 0, sizeof *data);
    data->file = _wcsdup(file);
    data->folder = _wcsdup(file);
    wchar_t *slash = wcsrchr(data->folder, L'\\');
    if (slash)
        *slash = L'\0';
    char *text = NULL;
    size_t n = 0;
    *problem = read_all(file, &text, &n);
    if (!*problem)
        *problem = parse(data, text, n);
    free(text);
    return *problem == NULL;
}

int data_is_vc_runtime(const Data *data, const char *name)
{
    for (size_t i = 0; i < data->n_vc_dlls; i++)
        if (_stricmp(name, data->vc_dlls[i]) == 0)
            return 1;
    return 0;
}

int data_is_api_set(const Data *data, const char *name)
{
    for (size_t i = 0; i < data->n_api_sets; i++)
        if (_strnicmp(name, data->api_sets[i], strlen(data->api_sets[i])) == 0)
            return 1;
    return 0;
}

/* --- the bundle folder --------------------------------------------------------------------- */

/* A record's path is relative to the data file's folder, '/'-separated: the checks and the
 * packs' folders both reach the bundle's files through here. */
wchar_t *bundle_path(const Data *data, const char *relative)
{
    wchar_t *rel = widen(relative);
    size_t n = wcslen(data->folder) + 1 + wcslen(rel) + 1;
    wchar_t *full = xrealloc(NULL, n * sizeof(wchar_t));
    wcscpy(full, data->folder);
    wcscat(full, L"\\");
    wcscat(full, rel);
    for (wchar_t *p = full; *p; p++)
        if (*p == L'/')
            *p = L'\\';
    free(rel);
    return full;
}
