// METRALE_NVTX: whether a context annotates the caching pool's chunks and
// blocks for tools (Backend::mem_annotations_begin). Read at context create.
#pragma once

namespace metrale::core {

// Unset or empty: true (the annotations cost nothing without a tool, see
// Backend::mem_annotations_begin). "1": true, "0": false. Anything else
// throws INVALID_ARGUMENT naming the variable and its value.
bool nvtx_wanted();

}  // namespace metrale::core
