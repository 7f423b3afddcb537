#ifndef VEIL_CHIREDIS_H
#define VEIL_CHIREDIS_H
/* hiredis (Debian's libhiredis-dev, 0.14): the Redis client the room server shares rooms through. */
#include <hiredis.h>
#include <async.h>
#endif
