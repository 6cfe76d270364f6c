/* bundle-doctor: checks a shipped bundle on the customer's machine against bundle-doctor.dat,
 * the data file `bundle build` writes next to the app. The doctor never re-derives what the
 * build knew (which files, which imports, which GPU code): it reads it from the data file and
 * asks this machine only what the build could not know (driver, GPUs, System32, PATH, the
 * loader's verdict). Shared declarations of the translation units, each calling only those
 * below it (tests/test_doctor_sources.py keeps it so):
 *   bundle-doctor.c  command line, report (text and JSON), exit codes
 *   checks.c         the checks, each adding findings
 *   packs.c          the execution-provider packs: whether each can run on this machine
 *   machine.c        what the machine says: Windows, the NVIDIA driver and GPUs, FileVersion
 *   findings.c       the findings the checks add and the report prints
 *   data.c           the data file (version 1): parse, validate, SHA-256 via CNG
 *   text.c           UTF-8 buffers, JSON escaping, UTF-8/UTF-16
 */
#ifndef BUNDLE_DOCTOR_H
#define BUNDLE_DOCTOR_H

#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <stddef.h>

#define DOCTOR_VERSION "1.0.0"

#define EXIT_OK 0
#define EXIT_USAGE 2
#define EXIT_FINDINGS 17 /* the same as `bundle audit` with an error finding */
#define EXIT_DATA 22

/* What the runtime pack's setup writes into the app folder: the pack's SHA-256, one line
 * (bundler/lock.py's PACK_MARKER). A folder `bundle build` wrote has none. */
#define PACK_MARKER "bundle-pack.txt"

/* --- small growable things ------------------------------------------------------------- */

typedef struct {
    char *text; /* always NUL-terminated (after sb_init) */
    size_t len, cap;
} StrBuf;

void sb_init(StrBuf *sb);
void sb_add(StrBuf *sb, const char *text);
void sb_addn(StrBuf *sb, const char *text, size_t n);
void sb_printf(StrBuf *sb, const char *format, ...) __attribute__((format(gnu_printf, 2, 3)));
void sb_json(StrBuf *sb, const char *text); /* a JSON string literal, quotes included */
char *xstrdup(const char *text);
char *xprintf(const char *format, ...) __attribute__((format(gnu_printf, 1, 2)));
void *xrealloc(void *block, size_t size);
/* appends one element to a malloc'ed array and returns a pointer to it */
#define GROW(array, count)                                                                   \
    ((array) = xrealloc((array), sizeof *(array) * ((count) + 1)), &(array)[(count)++])

/* UTF-8 <-> UTF-16, malloc'ed; NULL only for NULL */
wchar_t *widen(const char *text);
char *narrow(const wchar_t *text);

/* --- the data file ----------------------------------------------------------------------- */

typedef struct {
    char *code, *severity, *name, *title;
} CheckRow;

typedef struct {
    unsigned long long size;
    char sha256[65];
    char *kind, *path; /* path: relative, with '/' as in the data file */
} FileRec;

typedef struct {
    char *path, *version;
} VersionRec;

typedef struct {
    char *path, *names; /* names: comma-separated, as written */
} ImportsRec;

typedef struct {
    char *path, *sass, *ptx; /* comma-separated arch names, or "-" */
} GpuRec;

typedef struct {
    char *name, *folder, *plugin; /* folder and plugin: relative, '/' as in the data file */
    const char *probe;            /* "nvidia-cuda", "intel" or "d3d12" (static) */
    char *min_capability, *min_driver; /* e.g. "8.0", "580.88"; "-" for none */
    char *needs;                  /* one sentence */
    char *min_ort;                /* the oldest ONNX Runtime it registers with, e.g. "1.24.4" */
} PackRec;

typedef struct {
    wchar_t *file;   /* the data file, full path */
    wchar_t *folder; /* the bundle folder: the data file's folder, no trailing '\' */
    char *tool, *profile, *ort;
    char *vc_mode, *vc_min; /* NULL without a vc_runtime record; vc_min "-" for no floor */
    char **vc_dlls; /* the VC++ runtime's DLL names (vc_dll records: bundle's one list) */
    size_t n_vc_dlls;
    char **api_sets; /* name prefixes the loader resolves as API sets (api_set records) */
    size_t n_api_sets;
    char *driver_dll, *driver_min;
    int cuda_major; /* meaningful only with driver_dll */
    CheckRow *checks;
    size_t n_checks;
    FileRec *files;
    size_t n_files;
    VersionRec *versions;
    size_t n_versions;
    char **loads;
    size_t n_loads;
    char **pruned; /* plain DLL names the build left out for the app's models (--model) */
    size_t n_pruned;
    ImportsRec *imports;
    size_t n_imports;
    GpuRec *gpus;
    size_t n_gpus;
    PackRec *packs; /* execution-provider packs (bundle build --ep); none in older files */
    size_t n_packs;
    char *runtime_pack; /* the lock's runtime pack, 64 lowercase hex; NULL in older files */
} Data;

/* Reads and validates `file`. On any problem returns 0 and sets *problem to one sentence
 * (malloc'ed) saying what is wrong and what to do. */
int data_load(const wchar_t *file, Data *data, char **problem);

/* Whether `name` (a plain DLL name) is a VC++ runtime DLL, or an API set, by the data file. */
int data_is_vc_runtime(const Data *data, const char *name);
int data_is_api_set(const Data *data, const char *name);
/* the bundle-relative posix path as a full Windows path, malloc'ed */
wchar_t *bundle_path(const Data *data, const char *relative);

/* SHA-256 of a buffer or of a whole file (read in chunks), lowercase hex into out[65].
 * Return 0 on success, else a Win32 / NTSTATUS-derived error number. */
unsigned long sha256_buffer(const void *bytes, size_t n, char out[65]);
unsigned long sha256_file(const wchar_t *path, char out[65]);

/* --- findings and the machine ---------------------------------------------------------- */

typedef struct {
    const char *code;
    char *message;
    char **files;
    size_t n_files;
    char **details;
    size_t n_details;
} Finding;

typedef struct {
    char name[256];
    int major, minor;
    unsigned long long memory;
} Gpu;

typedef struct {
    char windows[64];
    int have_driver;         /* nvcuda.dll was found and loaded */
    char dll_version[64];    /* nvcuda.dll's FileVersion, "" when it has none */
    char driver_version[32]; /* e.g. "551.61", "" when unknown */
    char cuda_version[32];   /* from cuDriverGetVersion, e.g. "12.4", "" when unknown */
    wchar_t *driver_path;
    Gpu *gpus;
    size_t n_gpus;
    int nvidia_asked; /* machine_nvidia ran */
    char *gpu_problem; /* why the driver lists no GPU (cuInit failed, ...); NULL when it did */
} Machine;

typedef struct {
    Data *data;
    Machine machine;
    int verify;
    Finding **findings;
    size_t n_findings;
    int pack_asked;       /* check_runtime_pack read the folder (a runtime_pack record) */
    /* The ONNX Runtime check_loads loaded by name, as the app does: its version (NULL when
     * none loaded or it has no GetVersionString) and where it came from (NULL when none). */
    char *ort_loaded, *ort_from;
    int ort_asked; /* check_loads tried to load it (not with --gpu-only) */
    char *installed_pack; /* bundle-pack.txt's pack, lowercase; NULL without the file */
} Doctor;

Finding *add_finding(Doctor *doctor, const char *code, char *message);
void finding_file(Finding *finding, const char *file);
void finding_detail(Finding *finding, char *detail); /* takes ownership */
const CheckRow *check_row(const Data *data, const char *code);

/* machine.c: what the machine says, adding no finding */
void machine_windows(Machine *machine);
/* Asks the NVIDIA driver `dll` (from System32) once: have_driver, the versions, and the GPUs
 * or gpu_problem. A second call does nothing. */
void machine_nvidia(Machine *machine, const char *dll);
/* Compares dotted versions part by part; a floor of two parts ("14.40") compares two parts. */
int version_below(const char *version, const char *floor);
/* FileVersion a.b.c.d of a file into out; 0 when it has none */
int file_version(const wchar_t *path, char *out, size_t n);

/* checks.c: each adds findings to the doctor */
void check_files(Doctor *doctor);
void check_driver_and_gpus(Doctor *doctor);
void check_shadowing(Doctor *doctor);
void check_pruned(Doctor *doctor);
void check_vc_runtime(Doctor *doctor);
void check_loads(Doctor *doctor);
/* BA406 when bundle-pack.txt names another runtime pack than the data file's */
void check_runtime_pack(Doctor *doctor);
/* Whether bundle-pack.txt names the lock's pack (meaningful after check_runtime_pack). */
int runtime_pack_matches(const Doctor *doctor);

/* packs.c: the execution-provider packs (ep records) */
/* Whether `pack` can run on this machine (1) or not (0); *reason (malloc'ed) says why. */
int pack_usable(Doctor *doctor, const PackRec *pack, char **reason);
/* BA811 / BA812 per installed pack, BA813 per pack whose folder is absent */
void check_packs(Doctor *doctor);
/* Whether the bundle-relative `path` lies in the folder of a pack that is not installed. */
int in_absent_pack(const Data *data, const char *path);
/* --eps: one line per ep record, "<kind><TAB>name<TAB>yes|no<TAB>reason", kind "ep" (or
 * "pack" for --packs, its old spelling) */
void ep_lines(Doctor *doctor, const char *kind, StrBuf *out);

#endif
