// dlib as face_recognition runs it, for `veil bench`: on every frame, dlib's HOG frontal face
// detector on the image upsampled once (face_recognition's default `number_of_times_to_upsample=1`),
// then the 68-point shape predictor on every face found — what `face_recognition.face_landmarks()`
// does through dlib's Python binding, here over Debian's libdlib-dev without Python in between.
//
// Input: raw RGB24 frames (width × height × 3 bytes each, back to back, no header), written by
// `veil bench`. Output: one JSON object on stdout. Only the detector and the predictor are timed.
//
// usage: dlib_track --model FILE --width W --height H [--warmup N]
//                   [--clip NAME FILE]... [--still NAME FILE]...
//   --clip   frames tracked one after another; the first N (--warmup) run once first, not timed
//   --still  single frames; every face found is reported with its 68 points
// Exit status: 0 on success, 1 when an input or the model cannot be read, 2 for a usage mistake.

#include <dlib/image_processing.h>
#include <dlib/image_processing/frontal_face_detector.h>
#include <dlib/image_transforms.h>
#include <dlib/revision.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Input {
    std::string name;
    std::string path;
};

struct Options {
    std::string model;
    long width = 0;
    long height = 0;
    long warmup = 0;
    std::vector<Input> clips;
    std::vector<Input> stills;
};

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

long parseCount(const std::string& flag, const char* text) {
    char* end = nullptr;
    long value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < 0 || value > 100000) {
        throw UsageError(flag + " wants a whole number, got '" + text + "'");
    }
    return value;
}

Options parseArguments(int argc, char** argv) {
    Options options;
    for (int i = 1; i < argc; ++i) {
        std::string flag = argv[i];
        auto need = [&](int count) {
            if (i + count >= argc) throw UsageError(flag + " needs " + std::to_string(count) + " value(s)");
        };
        if (flag == "--model") { need(1); options.model = argv[++i]; }
        else if (flag == "--width") { need(1); options.width = parseCount(flag, argv[++i]); }
        else if (flag == "--height") { need(1); options.height = parseCount(flag, argv[++i]); }
        else if (flag == "--warmup") { need(1); options.warmup = parseCount(flag, argv[++i]); }
        else if (flag == "--clip") { need(2); options.clips.push_back({argv[i + 1], argv[i + 2]}); i += 2; }
        else if (flag == "--still") { need(2); options.stills.push_back({argv[i + 1], argv[i + 2]}); i += 2; }
        else throw UsageError("unknown option " + flag);
    }
    if (options.model.empty()) throw UsageError("--model FILE is required (dlib's shape_predictor_68_face_landmarks.dat)");
    if (options.width <= 0 || options.height <= 0) throw UsageError("--width and --height are required");
    return options;
}

/// Reads raw RGB24 frames of one size from a file, one at a time.
class FrameReader {
public:
    FrameReader(const std::string& path, long width, long height)
        : path_(path), width_(width), height_(height), file_(path, std::ios::binary),
          buffer_(static_cast<size_t>(width * height * 3)) {
        if (!file_) throw std::runtime_error("cannot open " + path);
    }

    /// The next frame, or false at the end of the file. A partial frame at the end is an error.
    bool next(dlib::array2d<dlib::rgb_pixel>& image) {
        file_.read(reinterpret_cast<char*>(buffer_.data()), static_cast<std::streamsize>(buffer_.size()));
        std::streamsize got = file_.gcount();
        if (got == 0) return false;
        if (static_cast<size_t>(got) != buffer_.size()) {
            throw std::runtime_error(path_ + " ends in a partial frame (" + std::to_string(got) + " bytes)");
        }
        image.set_size(height_, width_);
        const unsigned char* p = buffer_.data();
        for (long r = 0; r < height_; ++r) {
            for (long c = 0; c < width_; ++c, p += 3) image[r][c] = dlib::rgb_pixel(p[0], p[1], p[2]);
        }
        return true;
    }

private:
    std::string path_;
    long width_, height_;
    std::ifstream file_;
    std::vector<unsigned char> buffer_;
};

/// One face: its detection box (in the frame's coordinates) and 68 points.
struct Face {
    dlib::rectangle box;
    dlib::full_object_detection shape;
};

/// The detector and predictor, used as face_recognition uses them.
class Tracker {
public:
    explicit Tracker(const std::string& model) : detector_(dlib::get_frontal_face_detector()) {
        dlib::deserialize(model) >> predictor_;
    }

    /// Faces in `image`: detection on the image upsampled once (dlib's `pyramid_up`, as the Python
    /// binding does for `detector(img, 1)`), boxes mapped back down, then 68 points in each box.
    std::vector<Face> faces(const dlib::array2d<dlib::rgb_pixel>& image) {
        dlib::pyramid_down<2> pyramid;
        dlib::pyramid_up(image, upsampled_, pyramid);
        std::vector<dlib::rect_detection> detections;
        detector_(upsampled_, detections, 0.0);
        std::vector<Face> found;
        found.reserve(detections.size());
        for (const auto& detection : detections) {
            dlib::rectangle box = pyramid.rect_down(detection.rect);
            found.push_back({box, predictor_(image, box)});
        }
        return found;
    }

private:
    dlib::frontal_face_detector detector_;
    dlib::shape_predictor predictor_;
    dlib::array2d<dlib::rgb_pixel> upsampled_;
};

std::string quoted(const std::string& text) {
    std::string out = "\"";
    for (char ch : text) {
        if (ch == '"' || ch == '\\') { out += '\\'; out += ch; }
        else if (static_cast<unsigned char>(ch) < 0x20) { char hex[8]; std::snprintf(hex, sizeof hex, "\\u%04x", ch); out += hex; }
        else out += ch;
    }
    return out + "\"";
}

double millisecondsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

/// Times every frame of one clip after running its first `warmup` frames untimed.
void runClip(Tracker& tracker, const Input& clip, const Options& options, bool last) {
    dlib::array2d<dlib::rgb_pixel> image;
    {
        FrameReader warm(clip.path, options.width, options.height);
        for (long i = 0; i < options.warmup && warm.next(image); ++i) (void)tracker.faces(image);
    }
    FrameReader reader(clip.path, options.width, options.height);
    std::printf("    {\"name\": %s, \"milliseconds\": [", quoted(clip.name).c_str());
    std::string faces;
    for (long index = 0; reader.next(image); ++index) {
        auto start = std::chrono::steady_clock::now();
        std::vector<Face> found = tracker.faces(image);
        double ms = millisecondsSince(start);
        std::printf("%s%.4f", index == 0 ? "" : ", ", ms);
        faces += (index == 0 ? "" : ", ") + std::to_string(found.size());
    }
    std::printf("], \"faces\": [%s]}%s\n", faces.c_str(), last ? "" : ",");
}

/// Every face in one still, with its box and 68 points.
void runStill(Tracker& tracker, const Input& still, const Options& options, bool last) {
    dlib::array2d<dlib::rgb_pixel> image;
    FrameReader reader(still.path, options.width, options.height);
    if (!reader.next(image)) throw std::runtime_error(still.path + " holds no frame");
    std::vector<Face> found = tracker.faces(image);
    std::printf("    {\"name\": %s, \"faces\": [", quoted(still.name).c_str());
    for (size_t f = 0; f < found.size(); ++f) {
        const Face& face = found[f];
        std::printf("%s{\"box\": [%ld, %ld, %ld, %ld], \"points\": [", f == 0 ? "" : ", ",
                    face.box.left(), face.box.top(), face.box.width(), face.box.height());
        for (unsigned long k = 0; k < face.shape.num_parts(); ++k) {
            std::printf("%s[%ld, %ld]", k == 0 ? "" : ", ", face.shape.part(k).x(), face.shape.part(k).y());
        }
        std::printf("]}");
    }
    std::printf("]}%s\n", last ? "" : ",");
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    try {
        options = parseArguments(argc, argv);
    } catch (const UsageError& error) {
        std::fprintf(stderr, "dlib_track: %s\n", error.what());
        return 2;
    }
    try {
        auto loading = std::chrono::steady_clock::now();
        Tracker tracker(options.model);
        double loadMilliseconds = millisecondsSince(loading);
        std::string version = std::to_string(DLIB_MAJOR_VERSION) + "." + std::to_string(DLIB_MINOR_VERSION);
        std::printf("{\n  \"tracker\": %s,\n  \"loadMilliseconds\": %.1f,\n  \"clips\": [\n",
                    quoted("dlib " + version + ": HOG frontal detector, 1x upsampling, 68-point shape predictor").c_str(),
                    loadMilliseconds);
        for (size_t i = 0; i < options.clips.size(); ++i) runClip(tracker, options.clips[i], options, i + 1 == options.clips.size());
        std::printf("  ],\n  \"stills\": [\n");
        for (size_t i = 0; i < options.stills.size(); ++i) runStill(tracker, options.stills[i], options, i + 1 == options.stills.size());
        std::printf("  ]\n}\n");
    } catch (const std::exception& error) {
        std::fflush(stdout);
        std::fprintf(stderr, "dlib_track: %s\n", error.what());
        return 1;
    }
    return 0;
}
