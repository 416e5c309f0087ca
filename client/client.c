/* placeholder: the client library is being written */
#include <pcache/pcache.h>
