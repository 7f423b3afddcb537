#include "CVeilWebRTC.h"

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
