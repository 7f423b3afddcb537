#include "CVeilRedis.h"
#include <adapters/glib.h>

GSource *veil_redis_attach(redisAsyncContext *ac, GMainContext *context) {
  GSource *source = redis_source_new(ac);
  if (source == NULL) return NULL;
  g_source_attach(source, context);
  return source;
}
