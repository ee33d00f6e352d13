import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

extension RunnerBoundaryTests {
  @Test(
    "a SIGTERM during start-up (while the input list is read from a writer that stays open) stops in order: summary, exit 143"
  )
  func signalDuringStartUp() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let child = try StreamingChild.start(
      ["run", "Examples/pipelines/thumbnail.json", "--input-list", "-", "--output", folder + "/out"], feedingInput: true)
    // 4 MiB of the list: once they are written, the runner is reading its input list (a socket
    // buffers far less), so it is still starting and has not looked at one input.
    let count = 100_000
    let list = Data((0..<count).map { "\(folder)/in/\($0).jpg\n" }.joined().utf8)
    let split = list.index(list.startIndex, offsetBy: 4 << 20)
    #expect(await child.send(list[..<split]).error == nil)
    kill(child.process.processIdentifier, SIGTERM)
    // The rest is never sent and standard input stays open: the signal alone ends the reading (a
    // read blocked on a writer that neither writes nor closes waited for it before).
    let result = await child.finishWithInputOpen()
    #expect(result.status == 143, "\(result.stderr)")
    #expect(result.stderr.contains("stopping: no new images start"), "\(result.stderr)")
    // Whole lines only, and none past what was sent.
    let sentLines = list[..<split].filter { $0 == UInt8(ascii: "\n") }.count
    let notStarted = result.stderr.split(separator: "\n").compactMap { line -> Int? in
      guard let range = line.range(of: "done 0, failed 0, not started ") else { return nil }
      return Int(line[range.upperBound...].prefix { $0.isNumber })
    }.first
    #expect(notStarted.map { $0 > 0 && $0 <= sentLines } == true, "\(result.stderr)")
    #expect(((try? FileManager.default.contentsOfDirectory(atPath: folder + "/out")) ?? []).isEmpty)
  }
}
