#ifndef VEIL_CGSTREAMER_H
#define VEIL_CGSTREAMER_H
#include <gst/gst.h>
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/video/video.h>
#endif
