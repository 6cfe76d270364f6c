/* Findings: what the checks (checks.c) report and the report (bundle-doctor.c) prints. Its
 * own file so that the checks and the command line depend on it, not on each other. */
#include "doctor.h"

#include <string.h>

Finding *add_finding(Doctor *doctor, const char *code, char *message)
{
    /* one allocation per finding: pointers handed out stay valid while more are added */
    Finding *f = xrealloc(NULL, sizeof *f);
    memset(f, 0, sizeof *f);
    *GROW(doctor->findings, doctor->n_findings) = f;
    f->code = code;
    f->message = message;
    return f;
}

void finding_file(Finding *finding, const char *file)
{
    for (size_t i = 0; i < finding->n_files; i++)
        if (_stricmp(finding->files[i], file) == 0)
            return;
    *GROW(finding->files, finding->n_files) = xstrdup(file);
}

void finding_detail(Finding *finding, char *detail)
{
    *GROW(finding->details, finding->n_details) = detail;
}

const CheckRow *check_row(const Data *data, const char *code)
{
    for (size_t i = 0; i < data->n_checks; i++)
        if (strcmp(data->checks[i].code, code) == 0)
            return &data->checks[i];
    return NULL;
}
