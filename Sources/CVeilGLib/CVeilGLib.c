#include "CVeilGLib.h"

gint veil_object_get_int(gpointer o, const gchar *n) { gint v = 0; g_object_get(o, n, &v, NULL); return v; }
guint veil_object_get_uint(gpointer o, const gchar *n) { guint v = 0; g_object_get(o, n, &v, NULL); return v; }
guint64 veil_object_get_uint64(gpointer o, const gchar *n) { guint64 v = 0; g_object_get(o, n, &v, NULL); return v; }
gboolean veil_object_get_bool(gpointer o, const gchar *n) { gboolean v = FALSE; g_object_get(o, n, &v, NULL); return v; }
gchar *veil_object_get_string(gpointer o, const gchar *n) { gchar *v = NULL; g_object_get(o, n, &v, NULL); return v; }
gpointer veil_object_get_object(gpointer o, const gchar *n) { gpointer v = NULL; g_object_get(o, n, &v, NULL); return v; }
void veil_object_set_int(gpointer o, const gchar *n, gint v) { g_object_set(o, n, v, NULL); }
void veil_object_set_uint(gpointer o, const gchar *n, guint v) { g_object_set(o, n, v, NULL); }
void veil_object_set_bool(gpointer o, const gchar *n, gboolean v) { g_object_set(o, n, v, NULL); }
void veil_object_set_string(gpointer o, const gchar *n, const gchar *v) { g_object_set(o, n, v, NULL); }
void veil_object_set_double(gpointer o, const gchar *n, gdouble v) { g_object_set(o, n, v, NULL); }
