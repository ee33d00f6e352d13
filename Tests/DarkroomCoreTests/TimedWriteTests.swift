import DarkroomCore
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A written file gets its name only if its run has not stopped by then (`CommitPoint`): an
/// input reported as timed out or cancelled leaves no file, and one whose file got its name is
/// reported done.
@Suite("Writes against time limits", .serialized, .timeLimit(.minutes(3)))
struct TimedWriteTests {
  /// A stage making an encoded image of a fixed size, named after the source.
  struct Encoded: Stage {
    static let kind = "encoded"
    let bytes: ImageBytes
    var identifier: String { "encoded" }
    func process(_ input: ImageSource, context: StageContext) async throws -> EncodedImage {
      EncodedImage(source: input, bytes: bytes, format: .jpeg, width: 1, height: 1)
    }
  }

  func folder() throws -> String {
    let path = NSTemporaryDirectory() + "darkroom-timed-write-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
  }

  @Test("a commit that says no leaves nothing: no new file, a replaced file unchanged, ECANCELED", arguments: [true, false])
  func refusedCommit(unnamed: Bool) throws {
    AtomicFile.unnamedFiles.withLock { $0 = unnamed }
    defer { AtomicFile.unnamedFiles.withLock { $0 = true } }
    let root = try folder()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let bytes = ImageBytes(Data("new".utf8))
    var asked = 0
    #expect(throws: (any Error).self) {
      try AtomicFile.write(bytes, named: "sub/new.jpg", in: root) {
        asked += 1
        return false
      }
    }
    try AtomicFile.write(ImageBytes(Data("old".utf8)), named: "old.jpg", in: root)
    do {
      try AtomicFile.write(bytes, named: "old.jpg", in: root) { false }
      Issue.record("a refused commit wrote the file")
    } catch let error as NSError {
      #expect(error.domain == NSPOSIXErrorDomain && error.code == Int(ECANCELED), "\(error)")
    }
    #expect(asked == 1)
    #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/sub").isEmpty)
    #expect(try FileManager.default.contentsOfDirectory(atPath: root).sorted() == ["old.jpg", "sub"])
    #expect(try String(contentsOfFile: root + "/old.jpg", encoding: .utf8) == "old")
  }

  @Test(
    "300 writes racing stage and operation time limits and cancellation: a run that finished has its file, one timed out has none"
  )
  func writesRacingLimits() async throws {
    let root = try folder()
    defer { try? FileManager.default.removeItem(atPath: root) }
    // 2 MB: a write of a millisecond or two, and limits from 0 to 4 ms, so that they pass before,
    // during and after it. One run at a time: queued behind each other, most would time out
    // before their write began.
    let bytes = ImageBytes(Data(repeating: 0xAB, count: 2_000_000))
    let pipeline = Pipeline<ImageSource, EncodedImage>(name: "timed", Encoded(bytes: bytes)).appending(
      Writer(directory: root, template: "{name}.{ext}"))
    var outcomes: [(name: String, result: Result<WrittenImage, PipelineError>)] = []
    for index in 0..<300 {
      var options = RunOptions()
      let limit = Duration.microseconds(Int.random(in: 0...4_000))
      if index % 3 == 0 { options.timeout = limit } else { options.stageTimeouts = ["write": limit] }
      let name = "image-\(index)"
      let operation = pipeline.run(ImageSource(path: root + "/in/\(name).png"), options: options)
      if index % 10 == 0 {
        Task {
          for _ in 0..<Int.random(in: 0..<64) { await Task.yield() }  // at some point of the run
          operation.cancel()
        }
      }
      outcomes.append((name, await operation.result))
    }
    let written = Set(try FileManager.default.contentsOfDirectory(atPath: root))
    var wrong: [String] = []
    for (name, result) in outcomes {
      switch result {
      case .success:
        if !written.contains(name + ".jpg") { wrong.append("\(name) finished without its file") }
      case .failure(let error) where error.code == .timedOut:
        if written.contains(name + ".jpg") { wrong.append("\(name) left its file but timed out") }
      case .failure(let error) where error.code == .cancelled:
        break  // cancelled after its file got its name, or before: either is a whole file or none
      case .failure(let error):
        wrong.append("\(name): \(error)")
      }
    }
    let counts = Dictionary(grouping: outcomes) { outcome in
      switch outcome.result {
      case .success: "done"
      case .failure(let error): "\(error.code)"
      }
    }.mapValues(\.count)
    #expect(wrong.isEmpty, "\(wrong.count) wrong: \(wrong.prefix(5)); \(counts)")
    #expect(written.allSatisfy { $0.hasSuffix(".jpg") }, "left behind: \(written.filter { !$0.hasSuffix(".jpg") })")
    let timedOut = outcomes.filter { if case .failure(let error) = $0.result { error.code == .timedOut } else { false } }
    #expect(written.count <= outcomes.count - timedOut.count)
  }
}
