/* Veil's C shim over webrtcbin: g_signal_emit_by_name is variadic → one typed function per
 * action signal the call layer emits. GObject's property getters and setters are in CVeilGLib. */
#ifndef VEIL_CVEILWEBRTC_H
#define VEIL_CVEILWEBRTC_H
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
#endif
