// Umbrella header of the CVips system library target: the libvips C API as Debian's libvips-dev
// installs it. Everything Swift cannot call directly (varargs, macros) lives in CVipsShim.
#include <vips/vips.h>
