/*
 * hello.c - the smallest app that embeds ONNX Runtime: it links onnxruntime.dll and prints
 * the runtime's version string. Used as the example app for `bundle` and (built for x86 and
 * x64) as the ortapp.exe test fixture.
 *
 *   hello.exe                          prints "ORT version: <version>"
 *   hello.exe --try-provider NAME.dll  also loads <folder of hello.exe>\NAME.dll the way ORT
 *                                      loads an execution-provider DLL and reports the result
 *
 * Exit codes: 0 ok, 2 usage error, 3 the provider DLL failed to load.
 *
 * ORT's header is deliberately not used: only the two first members of OrtApiBase are needed,
 * and their layout is part of ORT's stable C ABI.
 */
#include <stdint.h>
#include <stdio.h>
#include <wchar.h>
#include <windows.h>

typedef struct OrtApiBase {
    const void *(__stdcall *GetApi)(uint32_t version);
    const char *(__stdcall *GetVersionString)(void);
} OrtApiBase;

/* ORT_API_CALL is __stdcall on x86 and nothing on x64; __stdcall is ignored on x64, so one
 * declaration is right for both. Imported from onnxruntime.dll (import library: see
 * onnxruntime.def). */
__declspec(dllimport) const OrtApiBase *__stdcall OrtGetApiBase(void);

/* Load <directory of this exe>\name with LOAD_WITH_ALTERED_SEARCH_PATH, as ORT does for its
 * provider DLLs (onnxruntime_providers_cuda.dll etc.): the provider's own dependencies are
 * then searched starting in the provider's folder. Returns 0 on success, else GetLastError(). */
static DWORD try_provider(const wchar_t *name)
{
    wchar_t path[32768];
    DWORD n = GetModuleFileNameW(NULL, path, sizeof path / sizeof path[0]);
    if (n == 0 || n >= sizeof path / sizeof path[0])
        return GetLastError() ? GetLastError() : ERROR_INSUFFICIENT_BUFFER;

    /* Cut the path after its last separator, keeping the separator. */
    wchar_t *slash = wcsrchr(path, L'\\');
    wchar_t *fwd = wcsrchr(path, L'/');
    if (fwd && (!slash || fwd > slash))
        slash = fwd;
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    if (dir_len + wcslen(name) + 1 > sizeof path / sizeof path[0])
        return ERROR_FILENAME_EXCED_RANGE;
    wcscpy(path + dir_len, name);

    HMODULE module = LoadLibraryExW(path, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
    if (!module)
        return GetLastError();
    FreeLibrary(module);
    return 0;
}

/* wmain (built with -municode) so that a provider name outside the ANSI code page still
 * reaches LoadLibraryExW intact. */
int wmain(int argc, wchar_t **argv)
{
    const wchar_t *provider = NULL;
    if (argc == 3 && wcscmp(argv[1], L"--try-provider") == 0) {
        provider = argv[2];
    } else if (argc != 1) {
        fprintf(stderr, "usage: hello.exe [--try-provider NAME.dll]\n");
        return 2;
    }

    printf("ORT version: %s\n", OrtGetApiBase()->GetVersionString());

    if (provider) {
        /* Flush first: if loading the provider kills the process, the version line is
         * still visible in the captured output. */
        fflush(stdout);
        DWORD err = try_provider(provider);
        if (err == 0) {
            printf("LoadLibrary %ls: ok\n", provider);
            return 0;
        }
        printf("LoadLibrary %ls: error %lu\n", provider, (unsigned long)err);
        return 3;
    }
    return 0;
}
