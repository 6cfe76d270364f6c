/* bundle-doctor.exe [--json] [--verify] [--gpu-only | --eps] [--data FILE]
 *
 * Checks a shipped bundle on the machine it runs on, against bundle-doctor.dat (by default
 * next to the exe; the bundle folder is the data file's folder). Exit codes: 0 no error
 * finding, 17 at least one (as `bundle audit`), 22 the data file is missing or invalid, 2 a
 * usage mistake. doctor/README.md has the data format and the JSON document. */
#include "doctor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: bundle-doctor.exe [--json] [--verify] [--gpu-only | --eps] [--data FILE]\n";
static const char HELP[] =
    "Checks this bundle on this machine: every file present (--verify: and its SHA-256),\n"
    "the NVIDIA driver and GPUs against the GPU code the DLLs carry, DLLs of other versions\n"
    "in System32/KnownDLLs/PATH, the Visual C++ runtime, that each DLL really loads, that\n"
    "the runtime pack a setup installed is the app's, and whether each execution-provider\n"
    "pack has a device to run on.\n"
    "\n"
    "  --json       one JSON object on stdout instead of text\n"
    "  --verify     also compare every file's SHA-256 (reads the whole bundle)\n"
    "  --gpu-only   only the NVIDIA driver and the GPUs (the installer, before it copies)\n"
    "  --eps        only whether each execution provider (EP) can run here, one line\n"
    "               per EP: ep<TAB>NAME<TAB>yes|no<TAB>REASON (the installer, before\n"
    "               it copies)\n"
    "  --packs      the old spelling of --eps, whose lines begin with pack<TAB>\n"
    "  --data FILE  the data file (default: bundle-doctor.dat next to this exe)\n"
    "\n"
    "Exit codes: 0 no error found, 17 at least one error, 22 the data file is missing or\n"
    "invalid, 2 usage.\n";

/* --- output -------------------------------------------------------------------------------- */

/* UTF-8 text with LF line ends: to a console as UTF-16 (WriteConsoleW shows any script), to
 * a file or pipe as UTF-8 with CRLF. */
static void emit(DWORD which, const char *text)
{
    HANDLE handle = GetStdHandle(which);
    DWORD mode, written;
    if (handle == NULL || handle == INVALID_HANDLE_VALUE)
        return;
    if (GetConsoleMode(handle, &mode)) {
        StrBuf crlf;
        sb_init(&crlf);
        for (const char *p = text; *p; p++)
            sb_addn(&crlf, *p == '\n' ? "\r\n" : p, *p == '\n' ? 2 : 1);
        wchar_t *wide = widen(crlf.text);
        WriteConsoleW(handle, wide, (DWORD)wcslen(wide), &written, NULL);
        free(wide);
        free(crlf.text);
        return;
    }
    for (const char *p = text; *p;) {
        const char *lf = strchr(p, '\n');
        size_t n = lf ? (size_t)(lf - p) : strlen(p);
        WriteFile(handle, p, (DWORD)n, &written, NULL);
        if (!lf)
            break;
        WriteFile(handle, "\r\n", 2, &written, NULL);
        p = lf + 1;
    }
}

/* A finding whose code has no check row in the data file is still reported: as an error, so a
 * renderer that forgot a row cannot hide a problem. */
static const char *severity_of(const Data *data, const Finding *f)
{
    const CheckRow *row = check_row(data, f->code);
    return row ? row->severity : "error";
}

static const char *const SEVERITIES[] = {"error", "warning", "info"};

static size_t count_of(const Doctor *doctor, const char *severity)
{
    size_t n = 0;
    for (size_t i = 0; i < doctor->n_findings; i++)
        n += strcmp(severity_of(doctor->data, doctor->findings[i]), severity) == 0;
    return n;
}

/* Errors first, then warnings, then info; within a severity in the order the checks found
 * them (a stable insertion sort: a report has a handful of findings). Both reports read this. */
static size_t severity_rank(const Data *data, const Finding *f)
{
    for (size_t s = 0; s < 3; s++)
        if (strcmp(severity_of(data, f), SEVERITIES[s]) == 0)
            return s;
    return 3;
}

static void order_findings(Doctor *doctor)
{
    for (size_t i = 1; i < doctor->n_findings; i++) {
        Finding *f = doctor->findings[i];
        size_t rank = severity_rank(doctor->data, f), j = i;
        for (; j > 0 && severity_rank(doctor->data, doctor->findings[j - 1]) > rank; j--)
            doctor->findings[j] = doctor->findings[j - 1];
        doctor->findings[j] = f;
    }
}

/* --- the report ---------------------------------------------------------------------------- */

/* A line of the header, a fact about the folder; none without a runtime_pack record (an older
 * data file) or where the folder was not looked at (--gpu-only). */
static void text_runtime_pack(const Doctor *doctor, StrBuf *out)
{
    const char *installed = doctor->installed_pack;
    if (!doctor->pack_asked)
        return;
    sb_printf(out, "Runtime pack %.16s: ", doctor->data->runtime_pack);
    if (!installed)
        sb_printf(out, "not installed as a pack (no %s)\n", PACK_MARKER);
    else if (runtime_pack_matches(doctor))
        sb_add(out, "installed, matches the lock\n");
    else if (*installed)
        sb_printf(out, "the folder holds %.16s (%s), not the lock's\n", installed, PACK_MARKER);
    else
        sb_printf(out, "%s names no pack, not the lock's\n", PACK_MARKER);
}

/* The ORT that loaded by name (check_loads) beside each pack's minimum: header lines, facts
 * of this machine; nothing where no load was tried (--gpu-only, no ort or load record). */
static void text_ort(const Doctor *doctor, StrBuf *out)
{
    const Data *data = doctor->data;
    const char *loaded = doctor->ort_loaded;
    if (!doctor->ort_asked)
        return;
    if (doctor->ort_from)
        sb_printf(out, "ONNX Runtime %s loaded by name from %s (the bundle's: %s)\n",
                  loaded ? loaded : "of unknown version", doctor->ort_from, data->ort);
    else
        sb_printf(out, "ONNX Runtime: none loads by name (the bundle's: %s)\n", data->ort);
    for (size_t i = 0; i < data->n_packs; i++) {
        const PackRec *pack = &data->packs[i];
        sb_printf(out, "EP pack %s: needs ONNX Runtime %s or newer", pack->name, pack->min_ort);
        if (loaded)
            sb_printf(out, version_below(loaded, pack->min_ort) ? "; %s is older: ORT refuses it\n"
                                                                : "; %s meets it\n",
                      loaded);
        else
            sb_add(out, "\n");
    }
}

static void text_report(const Doctor *doctor, int exit_code, StrBuf *out)
{
    const Data *data = doctor->data;
    const Machine *m = &doctor->machine;
    char *folder = narrow(data->folder);
    sb_printf(out, "bundle-doctor %s: %s (profile %s, built by bundle %s)\n", DOCTOR_VERSION,
              folder, data->profile, data->tool);
    text_runtime_pack(doctor, out);
    sb_printf(out, "Windows %s\n", m->windows);
    if (m->have_driver)
        sb_printf(out, "NVIDIA driver %s (%s %s), CUDA %s\n",
                  m->driver_version[0] ? m->driver_version : "of unknown version",
                  data->driver_dll, m->dll_version[0] ? m->dll_version : "without a version",
                  m->cuda_version[0] ? m->cuda_version : "unknown");
    else if (data->driver_dll)
        sb_printf(out, "NVIDIA driver: none (%s not found)\n", data->driver_dll);
    for (size_t i = 0; i < m->n_gpus; i++)
        sb_printf(out, "GPU %zu: %s, compute capability %d.%d (sm_%d%d), %llu MB\n", i,
                  m->gpus[i].name, m->gpus[i].major, m->gpus[i].minor, m->gpus[i].major,
                  m->gpus[i].minor, m->gpus[i].memory >> 20);
    text_ort(doctor, out);
    sb_add(out, "\n");
    for (size_t i = 0; i < doctor->n_findings; i++) { /* in severity order: order_findings */
        const Finding *f = doctor->findings[i];
        const char *severity = severity_of(data, f);
        const CheckRow *row = check_row(data, f->code);
        sb_printf(out, "%s %s %s: %s\n", severity, f->code, row ? row->name : "unknown",
                  f->message);
        if (row)
            sb_printf(out, "    (%s)\n", row->title);
        for (size_t d = 0; d < f->n_details; d++)
            sb_printf(out, "    %s\n", f->details[d]);
    }
    size_t errors = count_of(doctor, "error"), warnings = count_of(doctor, "warning");
    size_t infos = count_of(doctor, "info");
    if (!doctor->n_findings)
        sb_add(out, "no problem found\n");
    sb_printf(out, "%s%zu error%s, %zu warning%s, %zu info (exit code %d)\n",
              doctor->n_findings ? "\n" : "", errors, errors == 1 ? "" : "s", warnings,
              warnings == 1 ? "" : "s", infos, exit_code);
    free(folder);
}

static void json_list(StrBuf *out, char **items, size_t n)
{
    sb_add(out, "[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            sb_add(out, ", ");
        sb_json(out, items[i]);
    }
    sb_add(out, "]");
}

static void json_machine(const Doctor *doctor, StrBuf *out)
{
    const Machine *m = &doctor->machine;
    sb_add(out, "\"machine\": {\"windows\": ");
    sb_json(out, m->windows);
    sb_add(out, ", \"driver\": ");
    if (m->have_driver) {
        sb_add(out, "{\"dll_version\": ");
        sb_json(out, m->dll_version);
        sb_add(out, ", \"driver_version\": ");
        sb_json(out, m->driver_version);
        sb_add(out, ", \"cuda_driver_version\": ");
        sb_json(out, m->cuda_version);
        sb_add(out, "}");
    } else {
        sb_add(out, "null");
    }
    sb_add(out, ", \"gpus\": [");
    for (size_t i = 0; i < m->n_gpus; i++) {
        const Gpu *g = &m->gpus[i];
        char text[64];
        sb_add(out, i ? ", {\"name\": " : "{\"name\": ");
        sb_json(out, g->name);
        snprintf(text, sizeof text, "%d.%d", g->major, g->minor);
        sb_add(out, ", \"capability\": ");
        sb_json(out, text);
        snprintf(text, sizeof text, "sm_%d%d", g->major, g->minor);
        sb_add(out, ", \"sm\": ");
        sb_json(out, text);
        sb_printf(out, ", \"memory_mb\": %llu}", g->memory >> 20);
    }
    sb_add(out, "]}");
}

/* Next to the folder, whose fact it is: null as for `text_runtime_pack`'s nothing. */
static void json_runtime_pack(const Doctor *doctor, StrBuf *out)
{
    sb_add(out, "\"runtime_pack\": ");
    if (!doctor->pack_asked) {
        sb_add(out, "null");
        return;
    }
    sb_add(out, "{\"lock\": ");
    sb_json(out, doctor->data->runtime_pack);
    sb_add(out, ", \"installed\": ");
    if (doctor->installed_pack)
        sb_json(out, doctor->installed_pack);
    else
        sb_add(out, "null");
    sb_printf(out, ", \"matches\": %s}", runtime_pack_matches(doctor) ? "true" : "false");
}

static void json_text_or_null(StrBuf *out, const char *text)
{
    if (text)
        sb_json(out, text);
    else
        sb_add(out, "null");
}

/* As text_ort: "ort": {"bundle", "loaded", "from"}, and "eps": [{"name", "min_ort",
 * "loaded_meets_minimum"}] (null where nothing loaded). */
static void json_ort(const Doctor *doctor, StrBuf *out)
{
    const Data *data = doctor->data;
    const char *loaded = doctor->ort_loaded;
    sb_add(out, "\"ort\": {\"bundle\": ");
    json_text_or_null(out, data->ort);
    sb_add(out, ", \"loaded\": ");
    json_text_or_null(out, loaded);
    sb_add(out, ", \"from\": ");
    json_text_or_null(out, doctor->ort_from);
    sb_add(out, "}, \"eps\": [");
    for (size_t i = 0; i < data->n_packs; i++) {
        sb_add(out, i ? ", {\"name\": " : "{\"name\": ");
        sb_json(out, data->packs[i].name);
        sb_add(out, ", \"min_ort\": ");
        sb_json(out, data->packs[i].min_ort);
        sb_add(out, ", \"loaded_meets_minimum\": ");
        sb_add(out, !loaded ? "null" : version_below(loaded, data->packs[i].min_ort) ? "false" : "true");
        sb_add(out, "}");
    }
    sb_add(out, "]");
}

static void json_report(const Doctor *doctor, int exit_code, StrBuf *out)
{
    const Data *data = doctor->data;
    char *folder = narrow(data->folder);
    sb_add(out, "{\"schema_version\": 1, \"tool\": \"bundle-doctor\", \"tool_version\": ");
    sb_json(out, DOCTOR_VERSION);
    sb_add(out, ", \"profile\": ");
    sb_json(out, data->profile);
    sb_add(out, ", \"folder\": ");
    sb_json(out, folder);
    sb_add(out, ", ");
    json_runtime_pack(doctor, out);
    sb_add(out, ", ");
    json_machine(doctor, out);
    sb_add(out, ", ");
    json_ort(doctor, out);
    sb_add(out, ", \"findings\": [");
    for (size_t i = 0; i < doctor->n_findings; i++) { /* in severity order: order_findings */
        const Finding *f = doctor->findings[i];
        const CheckRow *row = check_row(data, f->code);
        sb_add(out, i ? ", {\"code\": " : "{\"code\": ");
        sb_json(out, f->code);
        sb_add(out, ", \"name\": ");
        sb_json(out, row ? row->name : "unknown");
        sb_add(out, ", \"severity\": ");
        sb_json(out, severity_of(data, f));
        sb_add(out, ", \"files\": ");
        json_list(out, f->files, f->n_files);
        sb_add(out, ", \"message\": ");
        sb_json(out, f->message);
        sb_add(out, ", \"details\": ");
        json_list(out, f->details, f->n_details);
        sb_add(out, "}");
    }
    sb_printf(out, "], \"summary\": {\"error\": %zu, \"warning\": %zu, \"info\": %zu}, "
                   "\"exit_code\": %d}\n",
              count_of(doctor, "error"), count_of(doctor, "warning"), count_of(doctor, "info"),
              exit_code);
    free(folder);
}

/* --- command line -------------------------------------------------------------------------- */

static wchar_t *default_data_file(void)
{
    wchar_t exe[MAX_PATH * 4];
    DWORD n = GetModuleFileNameW(NULL, exe, MAX_PATH * 4);
    if (!n || n >= MAX_PATH * 4)
        return _wcsdup(L"bundle-doctor.dat");
    wchar_t *slash = wcsrchr(exe, L'\\');
    wcscpy(slash ? slash + 1 : exe, L"bundle-doctor.dat");
    return _wcsdup(exe);
}

static wchar_t *full_path(const wchar_t *path)
{
    DWORD n = GetFullPathNameW(path, 0, NULL, NULL);
    if (!n)
        return _wcsdup(path);
    wchar_t *full = xrealloc(NULL, (n + 1) * sizeof(wchar_t));
    GetFullPathNameW(path, n + 1, full, NULL);
    return full;
}

static int usage_error(const char *what, const wchar_t *arg)
{
    char *shown = narrow(arg);
    char *line = xprintf("bundle-doctor: %s: %s\n%s", what, shown, USAGE);
    emit(STD_ERROR_HANDLE, line);
    free(line);
    free(shown);
    return EXIT_USAGE;
}

int wmain(int argc, wchar_t **argv)
{
    int json = 0, verify = 0, gpu_only = 0;
    const char *eps = NULL; /* --eps: "ep", each line's first field; --packs: "pack" */
    wchar_t *data_file = NULL;
    for (int i = 1; i < argc; i++) {
        if (wcscmp(argv[i], L"--json") == 0)
            json = 1;
        else if (wcscmp(argv[i], L"--verify") == 0)
            verify = 1;
        else if (wcscmp(argv[i], L"--gpu-only") == 0)
            gpu_only = 1;
        else if (wcscmp(argv[i], L"--eps") == 0)
            eps = "ep";
        else if (wcscmp(argv[i], L"--packs") == 0) /* its name before issue 39 */
            eps = "pack";
        else if (wcscmp(argv[i], L"--help") == 0 || wcscmp(argv[i], L"-h") == 0 ||
                 wcscmp(argv[i], L"/?") == 0) {
            emit(STD_OUTPUT_HANDLE, USAGE);
            emit(STD_OUTPUT_HANDLE, HELP);
            return EXIT_OK;
        } else if (wcscmp(argv[i], L"--data") == 0) {
            if (i + 1 >= argc)
                return usage_error("--data needs a file", L"");
            data_file = full_path(argv[++i]);
        } else {
            return usage_error("unknown argument", argv[i]);
        }
    }
    if (eps && (json || verify || gpu_only)) {
        int old = strcmp(eps, "pack") == 0;
        return usage_error(old ? "--packs goes with --data alone" : "--eps goes with --data alone",
                           old ? L"--packs" : L"--eps");
    }
    /* no "cannot find DLL" or "insert disk" dialog: a failing load must come back as an error */
    SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOOPENFILEERRORBOX);
    if (!data_file)
        data_file = default_data_file();

    Data data;
    char *problem = NULL;
    if (!data_load(data_file, &data, &problem)) {
        char *shown = narrow(data_file);
        char *line = xprintf("bundle-doctor: %s: %s\n", shown, problem);
        emit(STD_ERROR_HANDLE, line);
        return EXIT_DATA;
    }
    Doctor doctor = {.data = &data, .verify = verify};
    machine_windows(&doctor.machine);
    if (eps) { /* the data file alone: nothing of the bundle's folder is looked at */
        StrBuf lines;
        sb_init(&lines);
        ep_lines(&doctor, eps, &lines);
        emit(STD_OUTPUT_HANDLE, lines.text);
        return EXIT_OK;
    }
    if (gpu_only) {
        check_driver_and_gpus(&doctor);
    } else {
        check_files(&doctor);
        check_runtime_pack(&doctor);
        check_driver_and_gpus(&doctor);
        check_shadowing(&doctor);
        check_pruned(&doctor);
        check_vc_runtime(&doctor);
        check_loads(&doctor);
        check_packs(&doctor);
    }

    order_findings(&doctor);
    int exit_code = count_of(&doctor, "error") ? EXIT_FINDINGS : EXIT_OK;
    StrBuf out;
    sb_init(&out);
    if (json)
        json_report(&doctor, exit_code, &out);
    else
        text_report(&doctor, exit_code, &out);
    emit(STD_OUTPUT_HANDLE, out.text);
    return exit_code;
}
