// The declarations in include/CTaskKitRuntime.h name functions of the Swift runtime; this file
// only gives SwiftPM a source for the target.
#include "CTaskKitRuntime.h"
