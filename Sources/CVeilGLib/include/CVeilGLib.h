/* Veil's C shim over GLib/GObject and webrtcbin: only what Swift cannot call directly.
 *  - g_signal_emit_by_name is variadic → one typed function per webrtcbin action signal;
 *  - g_object_get / g_object_set are variadic → typed getters and setters.
 * Everything else (signal connection, main loops, libsoup) is called from Swift as is. */
#ifndef VEIL_CVEILGLIB_H
#define VEIL_CVEILGLIB_H
#define GST_USE_UNSTABLE_API 1
#include <gst/gst.h>
#include <gst/webrtc/webrtc.h>

void veil_webrtc_create_offer(GstElement *webrtc, GstPromise *promise);
void veil_webrtc_create_answer(GstElement *webrtc, GstPromise *promise);
void veil_webrtc_set_local_description(GstElement *webrtc, GstWebRTCSessionDescription *desc, GstPromise *promise);
void veil_webrtc_set_remote_description(GstElement *webrtc, GstWebRTCSessionDescription *desc, GstPromise *promise);
void veil_webrtc_add_ice_candidate(GstElement *webrtc, guint mline, const gchar *candidate);
/* A new reference (transfer full), or NULL. */
GstWebRTCDataChannel *veil_webrtc_create_data_channel(GstElement *webrtc, const gchar *label, GstStructure *options);
void veil_webrtc_get_stats(GstElement *webrtc, GstPad *pad, GstPromise *promise);
/* Sends bytes on a data channel (the "send-data" action signal). */
void veil_webrtc_data_channel_send(GstWebRTCDataChannel *channel, GBytes *data);

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
