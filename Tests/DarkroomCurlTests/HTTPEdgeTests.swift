import Darkroom
import DarkroomHTTPTestServer
import DarkroomTesting
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Errors at the network's edges tell the truth: which limit was hit, with the right code.
extension HTTPTransportTests {
  @Test("a server that never completes the connection is a connect timeout, named as such, not the transfer timeout")
  func connectTimeoutIsNamed() async throws {
    // A listening socket with a full accept queue: the kernel drops further SYNs, so connecting
    // to it waits until the client gives up — a real connect timeout on loopback.
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(listener) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && listen(listener, 0) == 0 }
    }
    try #require(bound)
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
    }
    let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(filler) }
    let filled = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, length) == 0 }
    }
    try #require(filled)
    let port = Int(UInt16(bigEndian: address.sin_port))
    let harness = HTTPHarness {
      $0.retries = 0
      $0.connectTimeout = .milliseconds(500)
      $0.timeout = .seconds(30)
    }
    let clock = ContinuousClock()
    let started = clock.now
    let result = await harness.fetch("http://127.0.0.1:\(port)/x.jpg")
    #expect(result.errorCode == .timedOut)
    guard case .failure(let error) = result else { return }
    #expect(error.message.contains("(connectTimeout)"), "\(error.message)")
    #expect(clock.now - started < .seconds(10))
  }

  @Test("a response header of 200 KB fails clearly as fetchFailed saying the headers are too large, without retrying")
  func hugeResponseHeader() async throws {
    let big = String(repeating: "a", count: 200_000)
    let server = try await TestHTTPServer.start(routes: [
      "/big-header.jpg": .headers(.ok(body: image, contentType: "image/jpeg"), [("X-Big", big)]),
      "/many-headers.jpg": .headers(
        .ok(body: image, contentType: "image/jpeg"), (0..<4000).map { ("X-H\($0)", String(repeating: "b", count: 60)) }),
    ])
    defer { Task { try? await server.shutdown() } }
    let harness = HTTPHarness()
    for path in ["/big-header.jpg", "/many-headers.jpg"] {
      let result = await harness.fetch(server.url(path))
      #expect(result.errorCode == .fetchFailed, "\(path): \(result)")
      guard case .failure(let error) = result else { continue }
      #expect(error.message.contains("response headers are too large"), "\(path): \(error.message)")
      #expect(server.requestCount(path) == 1, "not retried")
    }
  }
}

extension HTTPTransportTests {
  @Test("a header holding a line break, NUL or a non-token name is never sent: refused in pipeline files and at fetch time")
  func headerInjection() async throws {
    let server = try await TestHTTPServer.start(routes: ["/a.jpg": .ok(body: image, contentType: "image/jpeg")])
    defer { Task { try? await server.shutdown() } }
    let hostile: [(String, String)] = [
      ("Referer", "https://a.example\r\nX-Injected: 1"), ("Referer", "a\nb"), ("Referer", "a\rb"), ("Referer", "a\u{0}b"),
      ("X Space", "1"), ("X:Colon", "1"), ("", "1"), ("Bad\r\nName", "1"), ("X-Long", String(repeating: "v", count: 9000)),
    ]
    for (name, value) in hostile {
      // Through the source (Swift callers, a server building headers from a request).
      let harness = HTTPHarness()
      let fetcher = Fetcher(transports: [HTTPTransport(options: harness.options)])
      do {
        _ = try await StageHarness().run(fetcher, on: ImageSource(server.url("/a.jpg"), headers: [name: value]))
        Issue.record("sent \(name.debugDescription): \(value.prefix(40).debugDescription)")
      } catch let error as PipelineError {
        #expect(error.code == .invalidInput, "\(error)")
      }
      // Through a pipeline file.
      let json = try JSONSerialization.data(withJSONObject: [
        "version": 1, "stages": [["stage": "fetch", "headers": [name: value]]],
      ])
      #expect(throws: PipelineError.self) {
        try PipelineDefinition.load(json: String(decoding: json, as: UTF8.self), registry: Darkroom.standardRegistry)
      }
    }
    #expect(server.requestCount("/a.jpg") == 0)
    // An ordinary header still goes through.
    let fine = HTTPHarness { $0.headers = ["Referer": "https://a.example/\tpage", "X-Token_1.2": "v"] }
    #expect(await fine.fetch(server.url("/a.jpg")).data != nil)
  }
}

extension HTTPTransportTests {
  @Test(
    "a request's own headers never go to another origin on a redirect (host or port); the same origin, or no headers, follow it")
  func headersStayWithTheirOrigin() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/a.jpg": .ok(body: image, contentType: "image/jpeg"), "/same": .redirect(to: "/a.jpg"),
    ])
    defer { Task { try? await server.shutdown() } }
    let port = try #require(URL(string: server.url("/"))?.port)
    let other = try await TestHTTPServer.start(routes: [
      "/other": .redirect(to: "http://localhost:\(port)/a.jpg"),
      "/port": .redirect(to: "http://127.0.0.1:\(port)/a.jpg"),
    ])
    defer { Task { try? await other.shutdown() } }
    let keyed = HTTPHarness {
      $0.allowHosts = ["127.0.0.1", "localhost", "::1"]
      $0.headers = ["X-Api-Key": "secret"]
      $0.retries = 0
    }
    let crossing = await keyed.fetch(other.url("/other"))
    #expect(crossing.errorCode == .forbiddenDestination, "\(crossing)")
    if case .failure(let error) = crossing { #expect(error.message.contains("own headers"), "\(error.message)") }
    #expect(server.requestCount("/a.jpg") == 0, "the other host got no request with the key")
    let otherPort = await keyed.fetch(other.url("/port"))
    #expect(otherPort.errorCode == .forbiddenDestination, "\(otherPort)")
    if case .failure(let error) = otherPort {
      #expect(error.message.contains("127.0.0.1:\(port)") && error.message.contains("another origin"), "\(error.message)")
    }
    #expect(server.requestCount("/a.jpg") == 0, "the other port got no request with the key")
    #expect(await keyed.fetch(server.url("/same")).data != nil, "a redirect on the same host is followed")
    // The origin is the URL as libcurl writes it: another spelling of the first host is that host.
    #expect(await keyed.fetch("http://127.1:\(port)/same").data != nil, "127.1 is 127.0.0.1, not a redirect")
    let plain = HTTPHarness {
      $0.allowHosts = ["127.0.0.1", "localhost", "::1"]
      $0.retries = 0
    }
    #expect(await plain.fetch(other.url("/other")).data != nil, "without headers of its own a request follows any redirect")
  }
}
