/* Veil's C shim over hiredis, for what Swift cannot call:
 *  - hiredis's GLib adapter (adapters/glib.h) is a set of static functions in a header, with a
 *    GSourceFuncs table of its own: compiled here once, behind one function;
 *  - the reply's fields are read in Swift; commands go through the non-variadic
 *    redisAsyncCommandArgv, so no variadic wrapper is needed. */
#ifndef VEIL_CVEILREDIS_H
#define VEIL_CVEILREDIS_H
#include <glib.h>
#include <hiredis.h>
#include <async.h>

/* Attaches the asynchronous connection `ac` to `context`: its socket's reads and writes are then
 * dispatched by that context's main loop. Returns the GSource (a new reference: destroy it with
 * g_source_destroy and drop it with g_source_unref once the connection is gone), or NULL. */
GSource *veil_redis_attach(redisAsyncContext *ac, GMainContext *context);
#endif
