/* Levelled logging to stderr with host, pid and source location, or to the
 * sink a caller installed (uccl_log_set_sink). */
#include "util/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

uccl_log_level_t uccl_log_level_current = UCCL_LOG_WARN;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

/* The sink is copied under the lock and called outside it, so a sink that
 * blocks (a Python handler waiting for the GIL) never holds up set_sink. */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static uccl_log_sink_t sink_fn;
static void *sink_arg;

void uccl_log_set_sink(uccl_log_sink_t sink, void *arg)
{
    pthread_mutex_lock(&sink_lock);
    sink_fn = sink;
    sink_arg = sink != NULL ? arg : NULL;
    pthread_mutex_unlock(&sink_lock);
}

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
    uccl_log_sink_t sink;
    void *arg;

    if ((unsigned)level > UCCL_LOG_TRACE)
        level = UCCL_LOG_ERROR;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&sink_lock);
    sink = sink_fn;
    arg = sink_arg;
    pthread_mutex_unlock(&sink_lock);
    if (sink != NULL) {
        sink(arg, level, base ? base + 1 : file, line, msg);
        return;
    }
    if (host[0] == '\0' && gethostname(host, sizeof(host) - 1) != 0)
        strcpy(host, "?");
    /* One fprintf per line so lines of concurrent processes do not interleave. */
    fprintf(stderr, "[uccl %s:%d %s:%d] %s %s\n", host, (int)getpid(), base ? base + 1 : file, line,
            level_names[level], msg);
}

void uccl_log_write(uccl_log_level_t level, const char *file, int line, const char *msg)
{
    uccl_log_emit(level, file != NULL ? file : "?", line, "%s", msg != NULL ? msg : "");
}
