// Umbrella header of the CCurl system library target: libcurl's declarations and types as
// Debian's libcurl4-openssl-dev installs them. Nothing links libcurl: CCurlShim opens it on first
// use and calls it through a table (Sources/CCurlShim/library.h). The varargs
// curl_easy_setopt/getinfo are wrapped with types there too.
#include <curl/curl.h>
