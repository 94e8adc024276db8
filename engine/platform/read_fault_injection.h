// Debug fault injection for model-file reads (issue #20's fault tests and bench/soak.py):
// makes DirectReader::read — every streamed layer, streamed expert and resident-unit read —
// fail with EIO or end short, and stop failing again, while a server runs.
//
// Off unless the environment variable SPILLWAY_DEBUG_READ_FAULTS names a control file when
// the process first asks (read once, on the first DirectReader read; later changes to the
// environment are ignored). Off, a read costs one relaxed load of a flag fixed at start.
// On, every read opens the control file and looks at its first word:
//   "eio"   the read fails with EIO, as a bad sector would (no bytes read)
//   "short" the read stops after half its span, as a file truncated under the reader
//   anything else, or no file: the read is not touched.
// So a test writes "eio", sees requests fail, removes the file and sees them succeed.
//
// Thread contract: safe from any thread (the reader threads call it concurrently).
#pragma once

#include <string>

namespace spillway::engine {

enum class ReadFault { None, Eio, Short };

// The fault to inject into the read about to start (None unless enabled, see above).
ReadFault injected_read_fault();

// The control file named at start, or "" when injection is off.
const std::string& read_fault_control_file();

}  // namespace spillway::engine
