/* Strings: growable UTF-8 buffers, JSON escaping, UTF-8 <-> UTF-16. Allocation failure ends
 * the program with one line (there is nothing sensible left to report). */
#include "doctor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void out_of_memory(void)
{
    static const char line[] = "bundle-doctor: out of memory\r\n";
    DWORD written;
    WriteFile(GetStdHandle(STD_ERROR_HANDLE), line, sizeof line - 1, &written, NULL);
    ExitProcess(70);
}

void *xrealloc(void *block, size_t size)
{
    void *grown = realloc(block, size ? size : 1);
    if (!grown)
        out_of_memory();
    return grown;
}

char *xstrdup(const char *text)
{
    size_t n = strlen(text) + 1;
    return memcpy(xrealloc(NULL, n), text, n);
}

void sb_init(StrBuf *sb)
{
    sb->cap = 256;
    sb->len = 0;
    sb->text = xrealloc(NULL, sb->cap);
    sb->text[0] = '\0';
}

void sb_addn(StrBuf *sb, const char *text, size_t n)
{
    if (sb->len + n + 1 > sb->cap) {
        while (sb->len + n + 1 > sb->cap)
            sb->cap *= 2;
        sb->text = xrealloc(sb->text, sb->cap);
    }
    memcpy(sb->text + sb->len, text, n);
    sb->len += n;
    sb->text[sb->len] = '\0';
}

void sb_add(StrBuf *sb, const char *text)
{
    sb_addn(sb, text, strlen(text));
}

static char *vformat(const char *format, va_list args)
{
    va_list again;
    va_copy(again, args);
    int n = vsnprintf(NULL, 0, format, args);
    char *text = xrealloc(NULL, (size_t)(n < 0 ? 0 : n) + 1);
    vsnprintf(text, (size_t)(n < 0 ? 0 : n) + 1, format, again);
    va_end(again);
    return text;
}

void sb_printf(StrBuf *sb, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *text = vformat(format, args);
    va_end(args);
    sb_add(sb, text);
    free(text);
}

char *xprintf(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *text = vformat(format, args);
    va_end(args);
    return text;
}

/* RFC 8259: quote, backslash and control characters escaped; other bytes (UTF-8) as they are. */
void sb_json(StrBuf *sb, const char *text)
{
    sb_add(sb, "\"");
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        switch (*p) {
        case '"': sb_add(sb, "\\\""); break;
        case '\\': sb_add(sb, "\\\\"); break;
        case '\n': sb_add(sb, "\\n"); break;
        case '\r': sb_add(sb, "\\r"); break;
        case '\t': sb_add(sb, "\\t"); break;
        default:
            if (*p < 0x20)
                sb_printf(sb, "\\u%04x", *p);
            else
                sb_addn(sb, (const char *)p, 1);
        }
    }
    sb_add(sb, "\"");
}

wchar_t *widen(const char *text)
{
    if (!text)
        return NULL;
    int n = MultiByteToWideChar(CP_UTF8, 0, text, -1, NULL, 0);
    wchar_t *wide = xrealloc(NULL, sizeof(wchar_t) * (size_t)(n > 0 ? n : 1));
    wide[0] = L'\0';
    if (n > 0)
        MultiByteToWideChar(CP_UTF8, 0, text, -1, wide, n);
    return wide;
}

char *narrow(const wchar_t *text)
{
    if (!text)
        return NULL;
    int n = WideCharToMultiByte(CP_UTF8, 0, text, -1, NULL, 0, NULL, NULL);
    char *utf8 = xrealloc(NULL, (size_t)(n > 0 ? n : 1));
    utf8[0] = '\0';
    if (n > 0)
        WideCharToMultiByte(CP_UTF8, 0, text, -1, utf8, n, NULL, NULL);
    return utf8;
}
