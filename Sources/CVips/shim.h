// Umbrella header of the CVips system library target: the libvips C API's declarations and types
// as Debian's libvips-dev installs them. Nothing links libvips: CVipsShim opens it on first use
// and calls it through a table (Sources/CVipsShim/library.h). Everything Swift calls lives there.
#include <vips/vips.h>
