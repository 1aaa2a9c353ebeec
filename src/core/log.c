/* Levelled logging to stderr with host, pid and source location. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

uccl_log_level_t uccl_log_level_current = UCCL_LOG_WARN;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

int uccl_log_level_parse(const char *text)
{
    if (text == NULL || *text == '\0')
        return -1;
    for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++)
        if (strcasecmp(text, level_names[i]) == 0)
            return i;
    if (text[0] >= '0' && text[0] <= '4' && text[1] == '\0')
        return text[0] - '0';
    return -1;
}

void uccl_log_emit(uccl_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    static char host[64];
    char msg[1024];
    const char *base = strrchr(file, '/');
    va_list ap;

    if (host[0] == '\0' && gethostname(host, sizeof(host) - 1) != 0)
        strcpy(host, "?");
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* One fprintf per line so lines of concurrent processes do not interleave. */
    fprintf(stderr, "[uccl %s:%d %s:%d] %s %s\n", host, (int)getpid(), base ? base + 1 : file, line,
            level_names[level], msg);
}
