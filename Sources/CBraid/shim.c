#include "CBraid.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>

static _Atomic(braid_log_sink) log_sink = NULL;

void braid_set_ngtcp2_log_sink(braid_log_sink sink) { atomic_store(&log_sink, sink); }

void braid_ngtcp2_log_printf(void *user_data, const char *format, ...) {
  braid_log_sink sink = atomic_load(&log_sink);
  if (sink == NULL) {
    return;
  }
  char line[1024];
  va_list ap;
  va_start(ap, format);
  vsnprintf(line, sizeof(line), format, ap);
  va_end(ap);
  sink(user_data, line);
}
