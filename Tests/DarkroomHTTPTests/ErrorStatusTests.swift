import DarkroomCore
import DarkroomHTTP
import Foundation
import Testing

@Suite("Error statuses")
struct ErrorStatusTests {
  static let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

  /// The codes DarkroomCore declares, read from its source.
  static func coreCodes() throws -> [String] {
    let source = try String(
      contentsOf: package.appendingPathComponent("Sources/DarkroomCore/Errors/PipelineError+Code.swift"), encoding: .utf8)
    return source.split(separator: "\n").compactMap { line in
      guard let range = line.range(of: "public static let ") else { return nil }
      return line[range.upperBound...].split(separator: " ").first.map(String.init)
    }
  }

  @Test("every code has a status, and the ones issue 15 names have theirs")
  func everyCode() throws {
    let codes = try Self.coreCodes()
    #expect(codes.count > 20)
    for code in codes + ["badSignature", "overloaded"] {
      #expect(ErrorStatus.table[PipelineError.Code(code)] != nil, "\(code) has no status")
    }
    let expected: [(PipelineError.Code, Int)] = [
      (.invalidInput, 400), (.badSignature, 403), (.forbiddenDestination, 403), (.notFound, 404), (.tooLarge, 413),
      (.corruptImage, 422), (.unsupportedFormat, 415), (.overloaded, 429), (.fetchFailed, 502), (.timedOut, 504),
    ]
    for (code, status) in expected { #expect(ErrorStatus(PipelineError(code, "x")).status == status, "\(code)") }
    #expect(ErrorStatus(PipelineError(PipelineError.Code("quotaExceeded"), "x")).status == 500)
  }

  @Test("the message never carries the error's own text (paths, hosts, roots)")
  func safeMessages() {
    for code in ErrorStatus.table.keys {
      let secret = "/srv/secret-root/images/a.jpg at internal.example:8443"
      let answer = ErrorStatus(PipelineError(code, "failed: \(secret)", source: secret))
      #expect(!answer.message.contains("secret") && !answer.message.contains("internal"), "\(code)")
      #expect(!answer.message.isEmpty)
    }
  }

  @Test("an origin's own 404 or 410 is a missing image; its other statuses are the origin's failure")
  func originStatuses() {
    for (origin, expected) in [(404, 404), (410, 404), (403, 502), (500, 502), (503, 502)] {
      var error = PipelineError(.httpStatus, "the server answered \(origin) for http://origin.internal/a.jpg")
      error.httpStatus = origin
      #expect(ErrorStatus(error).status == expected, "origin \(origin)")
    }
  }

  @Test("Docs/Server.md shows exactly the table")
  func documented() throws {
    let doc = try String(contentsOf: Self.package.appendingPathComponent("Docs/Server.md"), encoding: .utf8)
    var rows: [String: (Int, String)] = [:]
    let errors = doc.components(separatedBy: "## Errors").last ?? ""
    for line in errors.split(separator: "\n") where line.hasPrefix("| `") {
      let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
      guard cells.count == 3, let status = Int(cells[1]) else { continue }
      rows[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = (status, cells[2])
    }
    #expect(rows.count == ErrorStatus.table.count)
    for (code, answer) in ErrorStatus.table {
      #expect(rows[code.rawValue]?.0 == answer.status && rows[code.rawValue]?.1 == answer.message, "\(code)")
    }
  }
}
