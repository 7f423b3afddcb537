/* Veil's C shim over GObject: only what Swift cannot call directly.
 * g_object_get / g_object_set are variadic → one typed getter or setter per value type.
 * GLib alone: webrtcbin's action signals are in CVeilWebRTC. */
#ifndef VEIL_CVEILGLIB_H
#define VEIL_CVEILGLIB_H
#include <glib-object.h>

gint veil_object_get_int(gpointer object, const gchar *property);
guint veil_object_get_uint(gpointer object, const gchar *property);
guint64 veil_object_get_uint64(gpointer object, const gchar *property);
gboolean veil_object_get_bool(gpointer object, const gchar *property);
/* g_free() the result. */
gchar *veil_object_get_string(gpointer object, const gchar *property);
/* A new reference or NULL; g_object_unref() it. */
gpointer veil_object_get_object(gpointer object, const gchar *property);
void veil_object_set_int(gpointer object, const gchar *property, gint value);
void veil_object_set_uint(gpointer object, const gchar *property, guint value);
void veil_object_set_bool(gpointer object, const gchar *property, gboolean value);
void veil_object_set_string(gpointer object, const gchar *property, const gchar *value);
void veil_object_set_double(gpointer object, const gchar *property, gdouble value);
#endif
