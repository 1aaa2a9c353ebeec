/* Levelled logging: UCCL_LOG_LEVEL=error|warn|info|debug|trace, lines
 * prefixed "[uccl host:pid file:line] LEVEL" on stderr, or handed to the
 * sink set with uccl_log_set_sink (uccl.h). The levels are public. */
#ifndef UCCL_UTIL_LOG_H
#define UCCL_UTIL_LOG_H

#include <uccl/uccl.h>

extern uccl_log_level_t uccl_log_level_current;

void uccl_log_emit(uccl_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Parse "error".."trace" (or 0..4); returns -1 when unknown. */
int uccl_log_level_parse(const char *text);

#define uccl_log(level, ...)                                         \
    do {                                                             \
        if ((level) <= uccl_log_level_current)                       \
            uccl_log_emit((level), __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

#define uccl_error(...) uccl_log(UCCL_LOG_ERROR, __VA_ARGS__)
#define uccl_warn(...) uccl_log(UCCL_LOG_WARN, __VA_ARGS__)
#define uccl_info(...) uccl_log(UCCL_LOG_INFO, __VA_ARGS__)
#define uccl_debug(...) uccl_log(UCCL_LOG_DEBUG, __VA_ARGS__)
#define uccl_trace(...) uccl_log(UCCL_LOG_TRACE, __VA_ARGS__)

#endif
