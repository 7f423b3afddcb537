#include "CVeilGLib.h"

void veil_webrtc_create_offer(GstElement *w, GstPromise *p) { g_signal_emit_by_name(w, "create-offer", NULL, p); }
void veil_webrtc_create_answer(GstElement *w, GstPromise *p) { g_signal_emit_by_name(w, "create-answer", NULL, p); }
void veil_webrtc_set_local_description(GstElement *w, GstWebRTCSessionDescription *d, GstPromise *p) {
  g_signal_emit_by_name(w, "set-local-description", d, p);
}
void veil_webrtc_set_remote_description(GstElement *w, GstWebRTCSessionDescription *d, GstPromise *p) {
  g_signal_emit_by_name(w, "set-remote-description", d, p);
}
void veil_webrtc_add_ice_candidate(GstElement *w, guint mline, const gchar *c) { g_signal_emit_by_name(w, "add-ice-candidate", mline, c); }
GstWebRTCDataChannel *veil_webrtc_create_data_channel(GstElement *w, const gchar *label, GstStructure *options) {
  GstWebRTCDataChannel *channel = NULL;
  g_signal_emit_by_name(w, "create-data-channel", label, options, &channel);
  return channel;
}
void veil_webrtc_get_stats(GstElement *w, GstPad *pad, GstPromise *p) { g_signal_emit_by_name(w, "get-stats", pad, p); }
void veil_webrtc_data_channel_send(GstWebRTCDataChannel *c, GBytes *data) { g_signal_emit_by_name(c, "send-data", data); }

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
