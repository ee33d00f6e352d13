// Umbrella header of the CCurl system library target: libcurl as Debian's libcurl4-openssl-dev
// installs it. The varargs curl_easy_setopt/getinfo are wrapped with types in CCurlShim.
#include <curl/curl.h>
