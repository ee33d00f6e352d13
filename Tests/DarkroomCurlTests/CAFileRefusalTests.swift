import Darkroom
import DarkroomHTTPTestServer
import Foundation
import Testing

/// `caFile` and `caPath` are read when a pipeline loads, beneath the same roots as local sources;
/// a hostile pipeline file gets a typed error that names the option, never a hang or a crash.
@Suite("caFile and caPath at load time")
struct CAFileRefusalTests {
  /// Loads a one-stage pipeline with these fetch options; the error, or nil when it loaded.
  func load(_ options: String, root: String? = nil) -> PipelineError? {
    let json = #"{"version": 1, "stages": [{"stage": "fetch", "# + options + "}]}"
    do {
      _ = try PipelineDefinition.load(
        json: json, registry: Darkroom.standardRegistry, context: StageBuildContext(allowedRoot: root, validatingOnly: true))
      return nil
    } catch {
      return error
    }
  }

  func quoted(_ path: String) -> String { "\"\(path)\"" }

  /// Expects loading to fail with `code` and a message naming the option and saying `text`.
  func expectRefused(
    _ option: String, _ path: String, root: String? = nil, _ code: PipelineError.Code, saying text: String,
    sourceLocation: SourceLocation = #_sourceLocation
  ) {
    guard let error = load("\"\(option)\": " + quoted(path), root: root) else {
      Issue.record("\(option) \(path) loaded", sourceLocation: sourceLocation)
      return
    }
    #expect(error.code == code, sourceLocation: sourceLocation)
    #expect(error.message.contains("stages[0]: \(option): "), sourceLocation: sourceLocation)
    #expect(error.message.contains(text), "\(error.message)", sourceLocation: sourceLocation)
  }

  @Test("a caFile inside --root loads, and a pipeline with it fetches over HTTPS")
  func loadsAndFetches() async throws {
    let tls = try TLSFixtures()
    defer { tls.remove() }
    let server = try await tls.server(routes: ["/a.bin": .ok(body: [1, 2, 3])])
    defer { Task { try? await server.shutdown() } }
    let json = """
      {"version": 1, "stages": [{"stage": "fetch", "caFile": "\(tls.path("ca.pem"))", "allowHosts": ["127.0.0.1"], "retries": 0}]}
      """
    let graph = try PipelineDefinition.load(
      json: json, registry: Darkroom.standardRegistry, context: StageBuildContext(allowedRoot: tls.folder.path))
    let output = try await PipelineExecutor().start(graph, input: ImageSource(server.url("/a.bin")), as: FetchedData.self).value
    #expect(Array(output.bytes.data) == [1, 2, 3])
  }

  @Test("a caFile outside --root is accessDenied")
  func outsideRoot() throws {
    let tls = try TLSFixtures()
    defer { tls.remove() }
    let inner = tls.path("inner")
    try FileManager.default.createDirectory(atPath: inner, withIntermediateDirectories: true)
    expectRefused("caFile", tls.path("ca.pem"), root: inner, .accessDenied, saying: "outside the allowed root")
  }

  @Test("a symlink inside --root that leads outside it is accessDenied; one that stays inside loads")
  func symlinks() throws {
    let tls = try TLSFixtures()
    defer { tls.remove() }
    let inner = tls.path("inner")
    try FileManager.default.createDirectory(atPath: inner, withIntermediateDirectories: true)
    try FileManager.default.createSymbolicLink(atPath: inner + "/ca.pem", withDestinationPath: "../ca.pem")
    expectRefused("caFile", inner + "/ca.pem", root: inner, .accessDenied, saying: "resolves to \(tls.path("ca.pem"))")
    #expect(load(#""caFile": "# + quoted(inner + "/ca.pem"), root: tls.folder.path) == nil)
  }

  @Test("a caPath whose hashed link leads outside --root is accessDenied")
  func caPathLinkOutsideRoot() throws {
    let tls = try TLSFixtures()
    defer { tls.remove() }
    try FileManager.default.createDirectory(atPath: tls.path("inner/hashed"), withIntermediateDirectories: true)
    try FileManager.default.createSymbolicLink(atPath: tls.path("inner/hashed/1a2b3c4d.0"), withDestinationPath: "../../ca.pem")
    expectRefused("caPath", tls.path("inner/hashed"), root: tls.path("inner"), .accessDenied, saying: "outside the allowed root")
  }

  @Test("too large, a directory, a FIFO, /dev/zero and a missing file are refused without being read")
  func notReadable() throws {
    let tls = try TLSFixtures()
    defer { tls.remove() }
    let big = try tls.write(
      String(repeating: tls.authority.certificatePEM, count: TrustedCertificates.maxBytes / 500), to: "big.pem")
    expectRefused("caFile", big, .tooLarge, saying: "over the limit of \(TrustedCertificates.maxBytes) bytes")
    let block = "-----BEGIN CERTIFICATE-----\nMAIwAA==\n-----END CERTIFICATE-----\n"  // a certificate's outline
    let many = try tls.write(String(repeating: block, count: TrustedCertificates.maxCertificates + 1), to: "many.pem")
    expectRefused("caFile", many, .tooLarge, saying: "more than \(TrustedCertificates.maxCertificates) certificates")
    expectRefused("caFile", tls.folder.path, .invalidInput, saying: "is a directory; give a PEM file of CA certificates")
    let fifo = tls.path("fifo")
    #expect(mkfifo(fifo, 0o600) == 0)
    expectRefused("caFile", fifo, .invalidInput, saying: "not a regular file")
    expectRefused("caFile", "/dev/zero", .invalidInput, saying: "not a regular file")
    expectRefused("caFile", tls.path("missing.pem"), .notFound, saying: "does not exist")
  }

  @Test("text that is not PEM certificates is refused, saying what it is")
  func notPEM() throws {
    let tls = try TLSFixtures()
    defer { tls.remove() }
    let cases: [(bytes: [UInt8], says: String)] = [
      (Array("hello\n".utf8), "holds no PEM certificate"),
      ([0x30, 0x82, 0x01, 0x0a, 0x00, 0xff], "looks like a DER (binary) certificate"),
      (Array("-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n".utf8), "is not base64 of a DER certificate"),
      (Array("-----BEGIN CERTIFICATE-----\nMIIB\n".utf8), "has no -----END CERTIFICATE----- line"),
      // Base64 of DER that is not a certificate's outline: an empty sequence, one holding an
      // integer, one whose length runs past the end.
      (Array("-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n".utf8), "is not base64 of a DER certificate"),
      (Array("-----BEGIN CERTIFICATE-----\nMAMCAQA=\n-----END CERTIFICATE-----\n".utf8), "is not base64 of a DER certificate"),
      (Array("-----BEGIN CERTIFICATE-----\nMIL/MAA=\n-----END CERTIFICATE-----\n".utf8), "is not base64 of a DER certificate"),
      (Array("-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n".utf8), "holds a private key"),
      ([], "holds no PEM certificate"),
    ]
    for (index, item) in cases.enumerated() {
      expectRefused("caFile", try tls.write(item.bytes, to: "bad\(index).pem"), .invalidInput, saying: item.says)
    }
  }

  @Test("caPath must be a directory with hashed names; empty or over-long paths are definition errors")
  func caPathShape() throws {
    let tls = try TLSFixtures()
    defer { tls.remove() }
    expectRefused("caPath", tls.path("ca.pem"), .invalidInput, saying: "is not a directory")
    try tls.write(tls.authority.certificatePEM, to: "plain/ca.pem")
    expectRefused("caPath", tls.path("plain"), .invalidInput, saying: "openssl rehash")
    #expect(try #require(load(#""caFile": """#)).code == .invalidDefinition)
    let long = String(repeating: "a", count: 5000)
    #expect(try #require(load(#""caPath": "# + quoted(long))).message.contains("1 to 4096 bytes"))
  }

  @Test("a pipeline checked for queue workers does not read their CA files here; validate and workers do")
  func enqueueLeavesCAFilesToWorkers() throws {
    let json = #"{"version": 1, "stages": [{"stage": "fetch", "caFile": "/nonexistent/darkroom/ca.pem"}]}"#
    var forWorkers = StageBuildContext(validatingOnly: true)
    forWorkers.confinesFiles = true
    _ = try PipelineDefinition.load(json: json, registry: Darkroom.standardRegistry, context: forWorkers)
    var worker = StageBuildContext()
    worker.confinesFiles = true
    for context in [StageBuildContext(validatingOnly: true), worker] {
      #expect(throws: PipelineError.self) {
        try PipelineDefinition.load(json: json, registry: Darkroom.standardRegistry, context: context)
      }
    }
  }

  @Test("OpenSSL's hashed names are recognised")
  func hashedNames() {
    #expect(TrustedCertificates.isHashedName("5d2f6a1b.0"))
    #expect(TrustedCertificates.isHashedName("5d2f6a1b.12"))
    #expect(!TrustedCertificates.isHashedName("5D2F6A1B.0"))
    #expect(!TrustedCertificates.isHashedName("5d2f6a1b.r0"))
    #expect(!TrustedCertificates.isHashedName("ca.pem"))
    #expect(!TrustedCertificates.isHashedName("5d2f6a1b"))
  }
}
