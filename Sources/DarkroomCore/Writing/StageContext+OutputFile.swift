import Foundation

extension StageContext {
  /// Writes an output file as ``AtomicFile`` does, on the blocking pool, giving it its name only
  /// if the run has not stopped by then (``CommitPoint``): an input that times out or is cancelled
  /// leaves no file, and one whose file got its name is not reported as timed out.
  ///
  /// Throws `CancellationError` when the run stopped before the file got its name (the time limit
  /// or the cancellation says why), else ``AtomicFile``'s errors.
  ///
  /// ```swift
  /// try await context.writeOutputFile(image.bytes, named: "a.jpg", in: "out")
  /// ```
  package func writeOutputFile(_ bytes: ImageBytes, named name: String, in directory: String, overwrite: Bool = true)
    async throws
  {
    let commit = CommitPoint.current()
    try await withTaskCancellationHandler {
      try await blocking {
        do {
          try AtomicFile.write(bytes, named: name, in: directory, overwrite: overwrite, commit: commit.enter)
        } catch let error as NSError where error.domain == NSPOSIXErrorDomain && error.code == Int(ECANCELED) {
          throw CancellationError()
        }
      }
    } onCancel: {
      commit.cancel()
    }
  }
}
