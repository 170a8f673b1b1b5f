// The C side of the log callback: the library calls mg_log_bridge with the
// cgo.Handle value as its user pointer; it hands both to Go.
#include <stdint.h>
#include <metrale_gpu.h>
#include "_cgo_export.h"

void mg_log_bridge(metrale_log_level_t level, const char* message, void* user) {
  metraleGoLog((int)level, (char*)message, (uintptr_t)user);
}
