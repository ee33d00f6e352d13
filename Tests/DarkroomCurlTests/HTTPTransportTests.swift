import Darkroom
import DarkroomHTTPTestServer
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

/// Fetches through the real libcurl transport from a real server on 127.0.0.1.
struct HTTPHarness {
  var options = HTTPOptions()

  init(configure: (inout HTTPOptions) -> Void = { _ in }) {
    options.allowHosts = ["127.0.0.1"]
    options.retryBaseDelay = .milliseconds(20)
    configure(&options)
  }

  func fetch(_ url: String, maxBytes: Int = Fetcher.defaultMaxBytes) async -> Result<FetchedData, PipelineError> {
    let fetcher = Fetcher(maxBytes: maxBytes, transports: [HTTPTransport(options: options)])
    do {
      return .success(try await StageHarness().run(fetcher, on: ImageSource(url)))
    } catch let error as PipelineError {
      return .failure(error)
    } catch {
      return .failure(PipelineError(.stageFailed, "\(error)"))
    }
  }
}

extension Result where Failure == PipelineError {
  var errorCode: PipelineError.Code? {
    if case .failure(let error) = self { return error.code }
    return nil
  }
  var data: Success? { try? get() }
}

@Suite("HTTP fetching", .serialized)
struct HTTPTransportTests {
  let image: [UInt8]

  init() throws {
    image = Array(try TestImages.encoded(.jpeg(), width: 320, height: 240).data)
  }

  @Test("serves a real image end to end through the pipeline")
  func endToEnd() async throws {
    let server = try await TestHTTPServer.start(routes: ["/a.jpg": .ok(body: image, contentType: "image/jpeg")])
    defer { Task { try? await server.shutdown() } }
    var http = HTTPOptions()
    http.allowHosts = ["127.0.0.1"]
    let pipeline = Pipeline(name: "remote") {
      Fetcher(transports: [HTTPTransport(options: http)])
      ImageDecoder()
      Resizer(width: 64)
      ImageEncoder(.png())
    }
    let observer = RecordingObserver()
    let output = try await pipeline.run(ImageSource(server.url("/a.jpg")), options: RunOptions(observers: [observer])).value
    #expect(output.width == 64 && output.height == 48)
    #expect(server.requestCount("/a.jpg") == 1)
    let request = server.requests.first
    #expect(request?.headers["user-agent"]?.hasPrefix("Darkroom/") == true)
  }

  @Test("response metadata, conditional requests and 304")
  func metadataAndRevalidation() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/c.jpg": .conditional(
        body: image, contentType: "image/jpeg", etag: "\"v1\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", maxAge: 600)
    ])
    defer { Task { try? await server.shutdown() } }
    let first = try #require(await HTTPHarness().fetch(server.url("/c.jpg")).data)
    #expect(first.status == 200)
    #expect(first.etag == "\"v1\"")
    #expect(first.contentType == "image/jpeg")
    #expect(first.bytes.count == image.count)
    #expect(first.freshness() == .lifetime(.seconds(600)))
    #expect(first.lastModified == HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"))
    var options = HTTPOptions()
    options.allowHosts = ["127.0.0.1"]
    let revalidated = try await HTTPTransport(options: options).fetch(ImageSource(server.url("/c.jpg")), ifNoneMatch: "\"v1\"")
    #expect(revalidated.notModified)
    #expect(revalidated.status == 304)
    #expect(revalidated.bytes.count == 0)
    #expect(server.requests.last?.headers["if-none-match"] == "\"v1\"")
  }

  @Test("HTTP errors keep their status; 4xx is not retried, 5xx and 429 are, honouring Retry-After")
  func statusAndRetries() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/missing": .status(404),
      "/broken": .status(500),
      "/busy": .sequence([.status(503, headers: [("Retry-After", "0")]), .ok(body: image, contentType: "image/jpeg")]),
      "/limited": .sequence([.status(429, headers: [("Retry-After", "0")]), .status(429), .ok(body: image)]),
    ])
    defer { Task { try? await server.shutdown() } }
    let harness = HTTPHarness()
    let missing = await harness.fetch(server.url("/missing"))
    #expect(missing.errorCode == .httpStatus)
    if case .failure(let error) = missing { #expect(error.httpStatus == 404) }
    #expect(server.requestCount("/missing") == 1)
    #expect(await harness.fetch(server.url("/broken")).errorCode == .httpStatus)
    #expect(server.requestCount("/broken") == 3)  // the first try and two retries
    #expect(await harness.fetch(server.url("/busy")).data?.bytes.count == image.count)
    #expect(server.requestCount("/busy") == 2)
    #expect(await harness.fetch(server.url("/limited")).data != nil)
    #expect(server.requestCount("/limited") == 3)
  }

  @Test("maxBytes: refused from Content-Length, aborted without it")
  func sizeLimits() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/big-declared": .generated(byteCount: 5_000_000, withContentLength: true),
      "/big-streamed": .generated(byteCount: 5_000_000, withContentLength: false),
      "/small": .generated(byteCount: 1000, withContentLength: false),
    ])
    defer { Task { try? await server.shutdown() } }
    let harness = HTTPHarness()
    #expect(await harness.fetch(server.url("/big-declared"), maxBytes: 100_000).errorCode == .tooLarge)
    #expect(await harness.fetch(server.url("/big-streamed"), maxBytes: 100_000).errorCode == .tooLarge)
    #expect(await harness.fetch(server.url("/small"), maxBytes: 100_000).data?.bytes.count == 1000)
  }

  @Test("redirect chains are followed, loops and long chains refused")
  func redirects() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/r1": .redirect(to: "/r2"), "/r2": .redirect(to: "/a.jpg", status: 301), "/a.jpg": .ok(body: image),
      "/loop1": .redirect(to: "/loop2"), "/loop2": .redirect(to: "/loop1"),
    ])
    defer { Task { try? await server.shutdown() } }
    let harness = HTTPHarness()
    let followed = try #require(await harness.fetch(server.url("/r1")).data)
    #expect(followed.bytes.count == image.count)
    #expect(followed.metadata["url"] == server.url("/a.jpg"))
    #expect(await harness.fetch(server.url("/loop1")).errorCode == .tooManyRedirects)
  }

  @Test("the SSRF guard refuses non-public destinations, also on a redirect hop, unless allowed")
  func ssrfGuard() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/a.jpg": .ok(body: image), "/to-private": .redirect(to: "http://10.255.255.1:9/x.jpg"),
      "/to-localhost": .redirect(to: "http://localhost:9/x.jpg"),
    ])
    defer { Task { try? await server.shutdown() } }
    let closed = HTTPHarness { $0.allowHosts = [] }
    #expect(await closed.fetch(server.url("/a.jpg")).errorCode == .forbiddenDestination)
    #expect(server.requestCount("/a.jpg") == 0)  // refused before connecting
    let open = HTTPHarness()
    #expect(await open.fetch(server.url("/to-private")).errorCode == .forbiddenDestination)
    #expect(await open.fetch(server.url("/to-localhost")).errorCode == .forbiddenDestination)
    let cidr = HTTPHarness { $0.allowHosts = ["127.0.0.0/8"] }
    #expect(await cidr.fetch(server.url("/a.jpg")).data != nil)
    // The guard made for one set of allowed hosts is kept for it alone: after a transfer that
    // allowed loopback, others still refuse it.
    #expect(await closed.fetch(server.url("/a.jpg")).errorCode == .forbiddenDestination)
    let other = HTTPHarness { $0.allowHosts = ["127.0.0.2/32", "localhost"] }
    #expect(await other.fetch(server.url("/a.jpg")).errorCode == .forbiddenDestination)
    #expect(await cidr.fetch(server.url("/a.jpg")).data != nil)
    #expect(server.requestCount("/a.jpg") == 2)
    // A host name allows the addresses it resolves to (read only for an address that is not
    // public and in no allowed range); the same address under another name stays refused.
    let named = HTTPHarness { $0.allowHosts = ["LocalHost"] }
    let byName = server.url("/a.jpg").replacingOccurrences(of: "127.0.0.1", with: "localhost")
    #expect(await named.fetch(byName).data != nil)
    let refused = await named.fetch(server.url("/a.jpg"))
    #expect(refused.errorCode == .forbiddenDestination)
    if case .failure(let error) = refused { #expect(error.message.contains("127.0.0.1, in the non-public range 127.0.0.0/8")) }
    #expect(server.requestCount("/a.jpg") == 3)
  }

  @Test("the SSRF guard refuses IPv6 forms that embed an IPv4 address: compatible, translated, NAT64, also on a redirect")
  func ssrfGuardEmbeddedIPv4() async throws {
    let embedded = ["[::127.0.0.1]", "[::ffff:0:127.0.0.1]", "[::a9fe:a9fe]", "[::ffff:0:a9fe:a9fe]", "[64:ff9b::7f00:1]"]
    let server = try await TestHTTPServer.start(
      routes: Dictionary(
        uniqueKeysWithValues: embedded.enumerated().map { ("/to-\($0.offset)", .redirect(to: "http://\($0.element):9/x.jpg")) }))
    defer { Task { try? await server.shutdown() } }
    let open = HTTPHarness { $0.retries = 0 }
    for (index, host) in embedded.enumerated() {
      let direct = await open.fetch("http://\(host):9/x.jpg")
      #expect(direct.errorCode == .forbiddenDestination, "\(host): \(direct)")
      #expect(await open.fetch(server.url("/to-\(index)")).errorCode == .forbiddenDestination, "redirect to \(host)")
    }
  }

  @Test("broken transfers: truncated body, reset, slow headers, trickle")
  func brokenTransfers() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/truncated": .truncated(body: Array(image.prefix(1000)), declaredLength: image.count),
      "/reset": .resetMidBody(body: image, after: 1000),
      "/slow": .slowHeaders(delay: .seconds(5), then: .ok(body: image)),
      "/trickle": .trickle(body: image, chunkSize: 100, interval: .milliseconds(500)),
    ])
    defer { Task { try? await server.shutdown() } }
    let noRetry = HTTPHarness { $0.retries = 0 }
    #expect(await noRetry.fetch(server.url("/truncated")).errorCode == .fetchFailed)
    #expect(await noRetry.fetch(server.url("/reset")).errorCode == .fetchFailed)
    let clock = ContinuousClock()
    let started = clock.now
    let slow = HTTPHarness {
      $0.retries = 0
      $0.timeout = .seconds(1)
    }
    #expect(await slow.fetch(server.url("/slow")).errorCode == .timedOut)
    let trickling = HTTPHarness {
      $0.retries = 0
      $0.lowSpeedLimit = 10_000
      $0.lowSpeedTime = .seconds(1)
    }
    #expect(await trickling.fetch(server.url("/trickle")).errorCode == .timedOut)
    #expect(clock.now - started < .seconds(10), "time limits were not enforced")
  }

  @Test("content types, gzip, malformed URLs and DNS failures")
  func contentAndErrors() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/page": .ok(body: Array("<html></html>".utf8), contentType: "text/html"),
      "/zipped": .gzip(body: image, contentType: "image/jpeg"),
      "/twice": .ok(body: image, headers: [("Content-Type", "image/png"), ("content-type", "text/html")]),
      "/named": .ok(body: image, contentType: #"image/jpeg; name="a,b.jpg""#),
      "/quoted": .ok(body: image, headers: [("Content-Type", #"image/jpeg; x=""#), ("content-type", "text/html")]),
    ])
    defer { Task { try? await server.shutdown() } }
    let picky = HTTPHarness { $0.acceptedContentTypes = ["image/*"] }
    #expect(await picky.fetch(server.url("/page")).errorCode == .unsupportedFormat)
    // Content-Type twice, an image type then another: not every type it names is accepted.
    let twice = await picky.fetch(server.url("/twice"))
    #expect(twice.errorCode == .unsupportedFormat, "\(twice)")
    if case .failure(let error) = twice { #expect(error.message.contains("text/html"), "\(error.message)") }
    #expect(await picky.fetch(server.url("/named")).data != nil, "a comma in a quoted parameter is one type")
    // A quote left open in the first Content-Type does not hide the second one.
    #expect(await picky.fetch(server.url("/quoted")).errorCode == .unsupportedFormat)
    let unzipped = try #require(await HTTPHarness().fetch(server.url("/zipped")).data)
    #expect(Array(unzipped.bytes.data) == image)
    #expect(await HTTPHarness().fetch("http://host.invalid/a.jpg").errorCode == .fetchFailed)
    #expect(await HTTPHarness().fetch("http://exa mple.com/a.jpg").errorCode == .invalidInput)
    // TLS spoken to a plain HTTP server: the handshake fails.
    let tls = await HTTPHarness { $0.retries = 0 }.fetch("https://127.0.0.1:\(server.port)/zipped")
    #expect(tls.errorCode == .fetchFailed)
    if case .failure(let error) = tls { #expect(error.message.hasPrefix("TLS failed"), "\(error.message)") }
  }

  @Test("connections are reused and progress is reported")
  func reuseAndProgress() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/a.jpg": .ok(body: image, contentType: "image/jpeg"),
      "/slow.jpg": .trickle(
        body: image, chunkSize: max(1, image.count / 4), interval: .milliseconds(300), contentType: "image/jpeg"),
    ])
    defer { Task { try? await server.shutdown() } }
    let harness = HTTPHarness()
    _ = await harness.fetch(server.url("/a.jpg"))
    _ = await harness.fetch(server.url("/a.jpg"))
    let connections = Set(server.requests.map(\.connection))
    #expect(server.requests.count == 2)
    #expect(connections.count == 1, "the second transfer should reuse the first connection")

    var http = HTTPOptions()
    http.allowHosts = ["127.0.0.1"]
    let observer = RecordingObserver()
    let operation = Pipeline(name: "progress", Fetcher(transports: [HTTPTransport(options: http)]))
      .run(ImageSource(server.url("/slow.jpg")), options: RunOptions(observers: [observer]))
    _ = try await operation.value
    let progress = observer.events.compactMap { event -> (Int, Int?)? in
      if case .progress(let received, let expected) = event { return (received, expected) }
      return nil
    }
    #expect(!progress.isEmpty)
    #expect(progress.allSatisfy { $0.1 == image.count && $0.0 <= image.count })
  }

  @Test("a cache checkpoint follows the response's Cache-Control when maxAge is not set")
  func cacheFollowsHeaders() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/fresh.jpg": .conditional(body: image, contentType: "image/jpeg", etag: "\"e\"", lastModified: nil, maxAge: 600),
      "/private.jpg": .headers(.ok(body: image, contentType: "image/jpeg"), [("Cache-Control", "no-store")]),
    ])
    defer { Task { try? await server.shutdown() } }
    var http = HTTPOptions()
    http.allowHosts = ["127.0.0.1"]
    let store = MemoryStore(costLimit: 10 << 20)
    let pipeline = Pipeline(name: "cached") {
      Fetcher(transports: [HTTPTransport(options: http)])
      Cache<FetchedData>(store: store)
    }
    for _ in 0..<3 {
      _ = try await pipeline.process(ImageSource(server.url("/fresh.jpg")))
      _ = try await pipeline.process(ImageSource(server.url("/private.jpg")))
    }
    #expect(server.requestCount("/fresh.jpg") == 1)
    #expect(server.requestCount("/private.jpg") == 3)
  }

  @Test("cancelling an operation aborts its transfer promptly")
  func cancellation() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/trickle": .trickle(body: image, chunkSize: 10, interval: .milliseconds(200))
    ])
    defer { Task { try? await server.shutdown() } }
    var http = HTTPOptions()
    http.allowHosts = ["127.0.0.1"]
    let pipeline = Pipeline(name: "cancel", Fetcher(transports: [HTTPTransport(options: http)]))
    let observer = RecordingObserver()
    let operation = pipeline.run(ImageSource(server.url("/trickle")), options: RunOptions(observers: [observer]))
    // Wait until bytes are flowing, then cancel.
    for await event in operation.events {
      if case .progress = event { break }
      if case .stageStarted = event, server.requestCount("/trickle") > 0 { break }
    }
    let clock = ContinuousClock()
    let started = clock.now
    operation.cancel()
    let result = await operation.result
    #expect(result.errorCode == .cancelled)
    #expect(clock.now - started < .seconds(3))
    #expect(observer.names.last == "cancelled")
    #expect(observer.events.filter(\.isTerminal).count == 1)
    #expect(HTTPTransport.liveTransfers == 0, "a cancelled transfer leaked its handle")
  }

  @Test("connection refused, credentials redacted, and no handle outlives its transfer")
  func refusedAndRedacted() async throws {
    let server = try await TestHTTPServer.start(routes: ["/secret.jpg": .status(401)])
    defer { Task { try? await server.shutdown() } }
    let noRetry = HTTPHarness { $0.retries = 0 }
    // A port nothing listens on: bind one, note it, close it.
    let closedPort = try await TestHTTPServer.start()
    let port = closedPort.port
    try await closedPort.shutdown()
    #expect(await noRetry.fetch("http://127.0.0.1:\(port)/a.jpg").errorCode == .fetchFailed)
    let secret = "http://alice:s3cret@127.0.0.1:\(server.port)/secret.jpg"
    let result = await noRetry.fetch(secret)
    guard case .failure(let error) = result else {
      Issue.record("fetched a 401")
      return
    }
    #expect(error.httpStatus == 401)
    #expect(!error.message.contains("s3cret") && !(error.source ?? "").contains("s3cret"))
    #expect(error.message.contains("***"))
    #expect(server.requests.last?.headers["authorization"]?.hasPrefix("Basic ") == true)
    #expect(HTTPTransport.liveTransfers == 0)
  }
}
