import Darkroom
import DarkroomHTTPTestServer
import Foundation
import Testing

@testable import DarkroomHTTP

/// What an attack on the server found, each kept fixed.
@Suite("darkroom serve under attack")
struct ServerHardeningTests {
  @Test("a repeated URL is answered from memory, per format; another signature is checked anew")
  func hitIndex() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 1, delay: .zero)
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.key = "k"
    let running = try await RunningServer.start(configuration)
    let path = "fit-in/50x50/0.jpg"
    let signed = "/" + ThumborSignature(key: "k").sign(path) + "/" + path
    var types: [String] = []
    for accept in ["image/webp", "image/avif", "image/webp", "image/avif", "*/*"] {
      types.append(try await running.get(signed, headers: ["Accept": accept]).headers["content-type"] ?? "")
    }
    #expect(types == ["image/webp", "image/avif", "image/webp", "image/avif", "image/jpeg"])
    #expect(try await running.metric("darkroom_renders_total") == 3)
    #expect(try await running.get("/" + ThumborSignature(key: "other").sign(path) + "/" + path).status == 403)
    let unsafeAllowed = try await running.get("/unsafe/" + path, headers: ["Accept": "image/webp"])
    #expect(unsafeAllowed.status == 200 && unsafeAllowed.headers["content-type"] == "image/webp")
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("pipelined requests are answered in order, on the same connection")
  func pipelining() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 1, delay: .zero)
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let paths = ["/unsafe/30x30/0.jpg", "/healthz", "/unsafe/31x31/0.jpg", "/unsafe/filters:nope()/0.jpg", "/unsafe/32x32/0.jpg"]
    let (replies, stayedOpen) = try await RawSocket.keepAlive(port: running.port, paths: paths, pipelined: true)
    #expect(stayedOpen)
    #expect(replies.map(\.status) == [200, 200, 200, 400, 200])
    #expect(try replies.filter { $0.headers["content-type"] == "image/jpeg" }.map { try size(of: $0.body).0 } == [30, 31, 32])
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("an answer's size is bounded: a URL cannot ask for an image of unbounded pixels")
  func outputBounded() async throws {
    let origin = try await TestHTTPServer.start(routes: [
      "/tiny.png": .ok(body: try ServedFixtures.png(width: 8, height: 8, alpha: false), contentType: "image/png"),
      "/tall.png": .ok(body: try ServedFixtures.png(width: 1, height: 1000, alpha: false), contentType: "image/png"),
    ])
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.maxOutputPixels = 4_000_000
    let running = try await RunningServer.start(configuration)
    let cases: [(String, Int)] = [
      ("/unsafe/16000x16000/filters:format(gif)/tiny.png", 400),
      ("/unsafe/20000x1/filters:format(webp)/tiny.png", 400),
      ("/unsafe/65500x1/tall.png", 413),
      ("/unsafe/fit-in/20000x0/filters:upscale()/tiny.png", 413),
      ("/unsafe/1900x0/tiny.png", 200),
    ]
    for (path, status) in cases {
      let reply = try await running.get(path)
      #expect(reply.status == status, "\(path): \(String(decoding: reply.body.prefix(200), as: UTF8.self))")
    }
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("the origin is allowed only beneath itself: not its other ports, paths or schemes")
  func originScope() async throws {
    let origin = try await TestHTTPServer.start(routes: [
      "/img/a.jpg": .ok(body: try ServedFixtures.jpeg(), contentType: "image/jpeg"),
      "/private.jpg": .ok(body: try ServedFixtures.jpeg(), contentType: "image/jpeg"),
    ])
    let other = try await TestHTTPServer.start(routes: [
      "/secret.jpg": .ok(body: try ServedFixtures.jpeg(), contentType: "image/jpeg")
    ])
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.url("/img/")))
    #expect(try await running.get("/unsafe/20x20/a.jpg").status == 200)
    #expect(try await running.get("/unsafe/20x20/" + SourceEncoding.component(origin.url("/img/a.jpg"))).status == 200)
    for outside in [other.url("/secret.jpg"), origin.url("/private.jpg"), origin.url("/img/../private.jpg")] {
      #expect(try await running.get("/unsafe/20x20/" + SourceEncoding.component(outside)).status == 403, "\(outside)")
    }
    #expect(try await running.get("/unsafe/20x20/127.0.0.1:\(other.port)/secret.jpg").status != 200)
    // A segment that reads as a scheme (`http:/host/…`, which libcurl takes for `http://host/…`).
    for sneaky in ["http:%2F127.0.0.1:\(other.port)%2Fsecret.jpg", "http:/127.0.0.1:\(other.port)/secret.jpg"] {
      #expect(try await running.get("/unsafe/20x20/" + sneaky).status != 200, "\(sneaky)")
    }
    #expect(other.requestCount("/secret.jpg") == 0 && origin.requestCount("/private.jpg") == 0)
    try await running.stop()
    try await origin.shutdown()
    try await other.shutdown()
  }

  @Test("clients that reset right after sending never keep a render running")
  func resetAfterSending() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 10, delay: .seconds(60))
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.concurrency = 1
    configuration.queue = 10
    let running = try await RunningServer.start(configuration)
    let port = running.port
    for index in 0..<10 {
      try await RawSocket.onThread {
        let fd = try RawSocket.connect(port: port)
        var linger = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        RawSocket.send(fd, Array("GET /unsafe/20x20/\(index).jpg HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        close(fd)
      }
    }
    // Each render would wait 60 s for its origin: all ten end now only if each was cancelled.
    #expect(try await eventually { try await running.metric(#"darkroom_http_requests_total{status="499"}"#) == 10 })
    #expect(try await eventually { running.server.loader.activeCount == 0 })
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("an origin's private answer is not kept for others, and is answered private")
  func privateSources() async throws {
    let body = try ServedFixtures.jpeg()
    let origin = try await TestHTTPServer.start(routes: [
      "/mine.jpg": .headers(.ok(body: body, contentType: "image/jpeg"), [("Cache-Control", "private, max-age=600")]),
      "/any.jpg": .headers(.ok(body: body, contentType: "image/jpeg"), [("Vary", "*")]),
    ])
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    for image in ["mine.jpg", "any.jpg"] {
      let first = try await running.get("/unsafe/20x20/" + image)
      _ = try await running.get("/unsafe/20x20/" + image)
      #expect(first.headers["cache-control"]?.hasPrefix("private, max-age=") == true, "\(image)")
      #expect(origin.requestCount("/" + image) == 2, "\(image)")
    }
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("a connection that sends half a request and then nothing is closed after the idle timeout")
  func slowloris() async throws {
    var configuration = ServerConfiguration()
    configuration.allowUnsafe = true
    configuration.root = NSTemporaryDirectory()
    configuration.idleTimeout = 0.5
    let running = try await RunningServer.start(configuration)
    #expect(
      try await RawSocket.closedByServer(port: running.port, after: Array("GET / HTTP/1.1\r\nHost: x\r\nX-A: ".utf8), limit: 30))
    #expect(try await running.get("/healthz").status == 200)
    try await running.stop()
  }

  @Test("HEAD answers the health routes, and an error's HEAD says the GET's length")
  func head() async throws {
    var configuration = ServerConfiguration()
    configuration.allowUnsafe = true
    configuration.root = NSTemporaryDirectory()
    let running = try await RunningServer.start(configuration)
    for path in ["/healthz", "/readyz", "/metrics"] {
      #expect(try await running.get(path, method: "HEAD").status == 200, "\(path)")
    }
    let get = try await running.get("/unsafe/filters:nope()/a.jpg")
    let head = try await running.get("/unsafe/filters:nope()/a.jpg", method: "HEAD")
    #expect(head.status == 400 && head.headers["content-length"] == String(get.body.count))
    try await running.stop()
  }
}

@Suite("darkroom serve refusals")
struct ServerRefusalTests {
  @Test("a private origin the configuration does not open is refused; the log names the server's own setting")
  func privateOriginRefused() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 1, delay: .zero)
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.privateHosts = []
    let running = try await RunningServer.start(configuration)
    let reply = try await running.get("/unsafe/20x20/0.jpg")
    #expect(reply.status == 403, "\(String(decoding: reply.body, as: UTF8.self))")
    // The client sees no detail; the operator's log has the fetcher's message.
    let fetcher = running.server.fetcher
    let pipeline = Pipeline(name: "serve-fetch") { fetcher }
    let error = await #expect(throws: PipelineError.self) {
      _ = try await pipeline.process(ImageSource(origin.url("/0.jpg")))
    }
    #expect(error?.code == .forbiddenDestination)
    #expect(error?.message.contains("allow it with privateHosts") == true, "\(String(describing: error))")
    #expect(origin.requestCount("/0.jpg") == 0)
    try await running.stop()
    try await origin.shutdown()
  }
}
