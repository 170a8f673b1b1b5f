// METRALE_NVTX: whether a context describes the caching pool's chunks and
// blocks to tools (Backend::mem_annotations_begin). Read at context create.
#pragma once

#include "backend/backend.hpp"

namespace metrale::core {

// Unset or empty: Auto (on when a tool is attached). "1": On (even when
// no tool is detected; NVTX itself then decides). "0": Off. Anything else
// throws INVALID_ARGUMENT naming the variable and its value.
backend::Backend::Annotations nvtx_setting();

}  // namespace metrale::core
