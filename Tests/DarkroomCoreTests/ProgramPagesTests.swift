import Foundation
import Testing

@testable import DarkroomCore

@Suite("The program's own pages")
struct ProgramPagesTests {
  /// This process's resident memory, in pages (`/proc/self/statm`).
  static func residentPages() throws -> Int {
    let fields = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8).split(separator: " ")
    return try #require(fields.count > 1 ? Int(fields[1]) : nil)
  }

  @Test("letting go of the read-only segments lowers resident memory, and the code runs on")
  func release() throws {
    #if os(Linux)
      let before = try Self.residentPages()
      let released = ProgramPages.release()
      let after = try Self.residentPages()
      // The test binary's code alone is tens of megabytes; much of it was resident.
      #expect(released > 1 << 20)
      #expect(after < before, "\(before) pages resident before, \(after) after")
      // The code and constants are mapped again as they are touched: work goes on unchanged.
      let words = ["pipeline", "decode", "resize"].map { $0.uppercased() }.sorted()
      #expect(words == ["DECODE", "PIPELINE", "RESIZE"])
      #expect(try Self.residentPages() > 0)
    #endif
  }
}
