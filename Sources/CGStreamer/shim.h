#ifndef VEIL_CGSTREAMER_H
#define VEIL_CGSTREAMER_H
#define GST_USE_UNSTABLE_API 1   /* gst/webrtc declares its API unstable */
#include <gst/gst.h>
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/video/video.h>
#include <gst/audio/audio.h>
#include <gst/sdp/sdp.h>
#include <gst/webrtc/webrtc.h>
#include <gst/rtp/rtp.h>
#endif
