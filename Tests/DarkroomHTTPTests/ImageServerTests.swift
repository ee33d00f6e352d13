import Darkroom
import DarkroomHTTP
import DarkroomHTTPTestServer
import DarkroomVipsTesting
import Foundation
import Testing

/// Polls `condition` until it holds or `timeout` passes (a bounded wait for another process's
/// or thread's progress, generous for a loaded CI machine; each poll yields for 10 ms).
func eventually(timeout: Duration = .seconds(30), _ condition: () async throws -> Bool) async throws -> Bool {
  let deadline = ContinuousClock.now + timeout
  while ContinuousClock.now < deadline {
    if try await condition() { return true }
    try await Task.sleep(for: .milliseconds(10))
  }
  return try await condition()
}

/// The width and height of an encoded image, read by libvips.
func size(of bytes: [UInt8]) throws -> (Int, Int) {
  let decoded = try ImageDecoder().decode(FetchedData(source: ImageSource("reply"), bytes: ImageBytes(bytes)))
  return (decoded.width, decoded.height)
}

@Suite("darkroom serve: a real server, a real client, a real origin")
struct ImageServerTests {
  @Test("a thumbor URL is fetched from the origin, processed and answered with its headers")
  func servesThumborURLs() async throws {
    let origin = try await TestHTTPServer.start(routes: [
      "/photos/a.jpg": .ok(body: try ServedFixtures.jpeg(width: 640, height: 480), contentType: "image/jpeg"),
      "/photos/tall.jpg": .ok(body: try ServedFixtures.jpeg(width: 200, height: 400), contentType: "image/jpeg"),
    ])
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.url("/photos/")))
    let fit = try await running.get("/unsafe/fit-in/300x300/a.jpg")
    #expect(fit.status == 200)
    #expect(fit.headers["content-type"] == "image/jpeg")
    #expect(try size(of: fit.body) == (300, 225))
    #expect(fit.headers["etag"]?.hasPrefix("\"") == true)
    #expect(fit.headers["cache-control"]?.hasPrefix("public, max-age=") == true)
    #expect(fit.headers["x-request-id"]?.isEmpty == false)
    let fill = try await running.get("/unsafe/100x100/smart/a.jpg")
    #expect(try size(of: fill.body) == (100, 100))
    // A portrait image in a landscape box: adaptive-fit-in turns the box.
    let adaptive = try await running.get("/unsafe/adaptive-fit-in/100x50/tall.jpg")
    #expect(try size(of: adaptive.body) == (50, 100))
    let full = try await running.get("/unsafe/full-fit-in/100x100/tall.jpg")
    #expect(try size(of: full.body) == (100, 200))
    let absolute = try await running.get("/unsafe/50x0/" + SourceEncoding.component(origin.url("/photos/a.jpg")))
    #expect(absolute.status == 200)
    #expect(try size(of: absolute.body) == (50, 38))
    let head = try await running.get("/unsafe/fit-in/300x300/a.jpg", method: "HEAD")
    #expect(head.status == 200 && head.body.isEmpty && head.headers["content-length"] == String(fit.body.count))
    #expect(head.headers["etag"] == fit.headers["etag"])
    try await running.stop()
    try await origin.shutdown()
  }

  @Test(
    "an animated GIF stays animated with no format filter: WebP when Accept names it, else GIF (AVIF, JPEG and PNG hold one frame); the hit index keeps the two apart"
  )
  func animatedNegotiation() async throws {
    var gif = TestGIF(width: 40, height: 30, palette: [[255, 0, 0], [0, 0, 255]], loop: 0)
    for index in 0..<5 {
      gif.add(.init(width: 40, height: 30, indices: [UInt8](repeating: UInt8(index % 2), count: 1200), delay: 100))
    }
    let origin = try await TestHTTPServer.start(routes: [
      "/anim.gif": .ok(body: gif.bytes, contentType: "image/gif"),
      "/a.jpg": .ok(body: try ServedFixtures.jpeg(), contentType: "image/jpeg"),
    ])
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let cases: [(String?, String)] = [
      ("image/avif,image/webp,*/*;q=0.8", "image/webp"), ("image/avif,*/*", "image/gif"), ("image/webp,*/*", "image/webp"),
      ("*/*", "image/gif"), (nil, "image/gif"),
      // Again, from the hit index: a client naming AVIF alone must not get the WebP answer.
      ("image/avif,image/webp,*/*;q=0.8", "image/webp"), ("image/avif", "image/gif"),
    ]
    for (accept, expected) in cases {
      let reply = try await running.get("/unsafe/fit-in/20x20/anim.gif", headers: accept.map { ["Accept": $0] } ?? [:])
      #expect(reply.status == 200 && reply.headers["content-type"] == expected, "Accept \(accept ?? "none")")
      let back = try ImageDecoder().decode(FetchedData(source: ImageSource(path: "reply"), bytes: ImageBytes(reply.body)))
      #expect(back.frameCount == 5 && back.width == 20 && back.height == 15, "Accept \(accept ?? "none")")
    }
    // A still source is answered as before.
    let still = try await running.get("/unsafe/fit-in/64x64/a.jpg", headers: ["Accept": "image/avif"])
    #expect(still.headers["content-type"] == "image/avif")
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("Accept picks AVIF, WebP, JPEG or PNG (alpha), with Vary: Accept; a format filter wins")
  func negotiation() async throws {
    let origin = try await TestHTTPServer.start(routes: [
      "/a.jpg": .ok(body: try ServedFixtures.jpeg(), contentType: "image/jpeg"),
      "/alpha.png": .ok(body: try ServedFixtures.png(alpha: true), contentType: "image/png"),
    ])
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let cases: [(String, String?, String)] = [
      ("a.jpg", "image/avif,image/webp,*/*;q=0.8", "image/avif"), ("a.jpg", "image/webp,*/*", "image/webp"),
      ("a.jpg", "*/*", "image/jpeg"), ("a.jpg", nil, "image/jpeg"), ("alpha.png", "image/*", "image/png"),
      ("alpha.png", "image/webp", "image/webp"),
    ]
    for (image, accept, expected) in cases {
      let reply = try await running.get("/unsafe/fit-in/64x64/" + image, headers: accept.map { ["Accept": $0] } ?? [:])
      #expect(reply.status == 200)
      #expect(reply.headers["content-type"] == expected, "\(image) with Accept \(accept ?? "none")")
      #expect(reply.headers["vary"] == "Accept")
      #expect(ImageFormat.sniff(reply.body)?.mimeType == expected)
    }
    let named = try await running.get("/unsafe/filters:format(png)/a.jpg", headers: ["Accept": "image/avif"])
    #expect(named.headers["content-type"] == "image/png" && named.headers["vary"] == nil)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("If-None-Match is answered 304 from the result cache, with no origin request and no render")
  func notModified() async throws {
    let origin = try await TestHTTPServer.start(routes: [
      "/a.jpg": .ok(body: try ServedFixtures.jpeg(), contentType: "image/jpeg")
    ])
    let directory = try ServedFixtures.folder()
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.cacheDir = directory
    let running = try await RunningServer.start(configuration)
    let first = try await running.get("/unsafe/fit-in/120x120/a.jpg")
    let etag = try #require(first.headers["etag"])
    let again = try await running.get("/unsafe/fit-in/120x120/a.jpg", headers: ["If-None-Match": "\"other\", " + etag])
    #expect(again.status == 304 && again.body.isEmpty && again.headers["etag"] == etag)
    let hit = try await running.get("/unsafe/fit-in/120x120/a.jpg")
    #expect(hit.body == first.body)
    #expect(origin.requestCount("/a.jpg") == 1)
    #expect(try await running.metric("darkroom_renders_total") == 1)
    #expect(try await running.metric("darkroom_result_cache_hits_total") == 2)
    try await running.stop()
    // A new server on the same cache folder answers from disk.
    let restarted = try await RunningServer.start(configuration)
    let fromDisk = try await restarted.get("/unsafe/fit-in/120x120/a.jpg", headers: ["If-None-Match": etag])
    #expect(fromDisk.status == 304)
    #expect(origin.requestCount("/a.jpg") == 1)
    try await restarted.stop()
    try await origin.shutdown()
    try? FileManager.default.removeItem(atPath: directory)
  }

  @Test("Cache-Control says the configured max-age, or the source's own when it is shorter")
  func freshness() async throws {
    let body = try ServedFixtures.jpeg()
    let origin = try await TestHTTPServer.start(routes: [
      "/short.jpg": .headers(.ok(body: body, contentType: "image/jpeg"), [("Cache-Control", "max-age=60")]),
      "/none.jpg": .headers(.ok(body: body, contentType: "image/jpeg"), [("Cache-Control", "no-store")]),
      "/plain.jpg": .ok(body: body, contentType: "image/jpeg"),
    ])
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.maxAge = 3_600
    let running = try await RunningServer.start(configuration)
    func maxAge(_ image: String) async throws -> Int? {
      let reply = try await running.get("/unsafe/32x32/" + image)
      return reply.headers["cache-control"].flatMap { Int($0.components(separatedBy: "max-age=").last ?? "") }
    }
    #expect(try await maxAge("plain.jpg").map { (3_590...3_600).contains($0) } == true)
    #expect(try await maxAge("short.jpg").map { (50...60).contains($0) } == true)
    #expect(try await maxAge("none.jpg") == 0)
    // A source that may not be stored is rendered again each time.
    _ = try await maxAge("none.jpg")
    #expect(origin.requestCount("/none.jpg") == 2)
    #expect(origin.requestCount("/plain.jpg") == 1)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("max_bytes lowers the quality to the highest that fits")
  func maxBytes() async throws {
    let pixels = (0..<(400 * 300 * 3)).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }
    let noise = try ImageEncoder(.jpeg(quality: 95)).encode(
      DecodedImage(
        source: ImageSource("noise"), image: try VipsImage.fromPixels(pixels, width: 400, height: 300, bands: 3),
        sourceFormat: .png, sourceWidth: 400, sourceHeight: 300))
    let origin = try await TestHTTPServer.start(routes: [
      "/noise.jpg": .ok(body: Array(noise.bytes.data), contentType: "image/jpeg")
    ])
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let full = try await running.get("/unsafe/filters:format(jpeg):quality(90)/noise.jpg")
    let budget = full.body.count / 3
    let bounded = try await running.get("/unsafe/filters:format(jpeg):quality(90):max_bytes(\(budget))/noise.jpg")
    #expect(bounded.status == 200 && bounded.body.count <= budget)
    #expect(try size(of: bounded.body) == (400, 300))
    let roomy = try await running.get("/unsafe/filters:format(jpeg):quality(90):max_bytes(\(full.body.count * 2))/noise.jpg")
    #expect(roomy.body == full.body)
    let impossible = try await running.get("/unsafe/filters:format(jpeg):quality(90):max_bytes(100)/noise.jpg")
    #expect(impossible.status == 200 && impossible.body.count < bounded.body.count)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("errors have their status and a message safe to show: no server path, host or root")
  func errors() async throws {
    let root = try ServedFixtures.folder()
    try Data(try ServedFixtures.jpeg()).write(to: URL(fileURLWithPath: root + "/a.jpg"))
    try Data("not an image at all".utf8).write(to: URL(fileURLWithPath: root + "/broken.jpg"))
    var configuration = ServerConfiguration()
    configuration.root = root
    configuration.allowUnsafe = true
    let running = try await RunningServer.start(configuration)
    let cases: [(String, Int, String)] = [
      ("/unsafe/fit-in/50x50/a.jpg", 200, ""),
      ("/unsafe/fit-in/50x50/missing.jpg", 404, "the image was not found"),
      ("/unsafe/fit-in/50x50/broken.jpg", 415, "not supported"),
      ("/unsafe/fit-in/50x50/../etc/passwd", 400, ". or .. segments"),
      ("/unsafe/fit-in/50x50/evil.example.org/a.jpg", 404, "not found"),
      ("/unsafe/fit-in/50x50/" + SourceEncoding.component("http://evil.example.org/a.jpg"), 403, "not allowed"),
      ("/unsafe/fit-in/50x50/" + SourceEncoding.component("file:///etc/passwd"), 403, "not allowed"),
      ("/unsafe/fit-in/50x50/filters:watermark(b.png,0,0,0)/a.jpg", 400, "unsupported filter watermark"),
      ("/unsafe/fit-in/50x50/filters:blur(2):rotate(90)/a.jpg", 200, ""),
      ("/unsafe/99999999x1/a.jpg", 400, "not a thumbor URL"),
    ]
    for (path, status, message) in cases {
      let reply = try await running.get(path)
      let body = String(decoding: reply.body, as: UTF8.self)
      #expect(reply.status == status, "\(path): \(body)")
      #expect(message.isEmpty || body.contains(message), "\(path): \(body)")
      #expect(!body.contains(root) && !body.contains(NSTemporaryDirectory()), "\(path) leaks a path: \(body)")
    }
    try await running.stop()
    try? FileManager.default.removeItem(atPath: root)
  }

  @Test("signatures: thumbor's signer's URLs are served, a changed path or key is 403, unsafe needs --allow-unsafe")
  func signatures() async throws {
    let origin = try await TestHTTPServer.start(routes: [
      "/a.jpg": .ok(body: try ServedFixtures.jpeg(), contentType: "image/jpeg")
    ])
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.allowUnsafe = false
    configuration.key = "the secret"
    let running = try await RunningServer.start(configuration)
    let signer = ThumborSignature(key: "the secret")
    let path = "fit-in/80x80/a.jpg"
    #expect(try await running.get("/" + signer.sign(path) + "/" + path).status == 200)
    #expect(try await running.get("/" + signer.sign(path) + "/fit-in/81x80/a.jpg").status == 403)
    #expect(try await running.get("/" + ThumborSignature(key: "wrong").sign(path) + "/" + path).status == 403)
    let unsafe = try await running.get("/unsafe/" + path)
    #expect(unsafe.status == 403)
    if Libthumbor.available {
      let generated = try Libthumbor.url(key: "the secret", "width=90, height=60, smart=True, image_url='a.jpg'")
      let reply = try await running.get(generated)
      #expect(reply.status == 200, "\(generated)")
      #expect(try size(of: reply.body) == (90, 60))
    }
    try await running.stop()
    try await origin.shutdown()
  }
}

/// How thumbor's clients put an absolute URL in a path: percent-encoded as one component.
enum SourceEncoding {
  static func component(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
  }
}
