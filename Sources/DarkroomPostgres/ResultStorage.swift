import DarkroomCore
import NIOCore

/// Where a queue keeps job results: in its database up to ``maxStoredBytes`` each, and larger
/// ones in a folder that every machine mounts (``sharedFolder``), named by their SHA-256. Without
/// a shared folder, a larger result fails its job with `tooLarge` (not retried).
///
/// Every result's SHA-256 and size are recorded with it, and checked whenever it is read back,
/// from the table or from the folder.
///
/// ```swift
/// let storage = ResultStorage(maxStoredBytes: 4 << 20, sharedFolder: "/mnt/darkroom")
/// try await PostgresJobQueue.withQueue(at: location, storage: storage) { queue in … }
/// ```
public struct ResultStorage: Sendable, Hashable {
  /// 16 MiB: every thumbnail and most full-size photos.
  public static let defaultMaxStoredBytes = 16 << 20
  /// The most a result kept in the database may be (PostgreSQL's `bytea` stops at 1 GiB, and a
  /// row travels whole in one message).
  public static let maxStoredBytesLimit = 256 << 20

  /// Results up to this size are stored in the database (clamped to 0…``maxStoredBytesLimit``).
  public var maxStoredBytes: Int
  /// The folder for larger results, the same on every machine; `nil` for none.
  public var sharedFolder: String?

  public init(maxStoredBytes: Int = ResultStorage.defaultMaxStoredBytes, sharedFolder: String? = nil) {
    self.maxStoredBytes = min(max(maxStoredBytes, 0), Self.maxStoredBytesLimit)
    self.sharedFolder = sharedFolder
  }

  /// A result as its row holds it: the bytes (nil when they are in the shared folder), SHA-256 and size.
  struct Placed: Sendable {
    var name: String
    var bytes: [UInt8]?
    var digest: String
    var size: Int64
    var overwrite = true
  }

  /// Each result checked (names distinct once stored) and placed: large ones are written to the
  /// shared folder now, before the job can be marked done.
  func place(_ results: [JobResult]) async throws(PipelineError) -> [Placed] {
    var names = Set<String>()
    var placed: [Placed] = []
    for result in results {
      let name = result.name.storable(maxBytes: 1_024)
      guard names.insert(name).inserted else {
        throw PipelineError(.invalidInput, "two results of one job are both named \"\(name.prefix(80))\"")
      }
      guard result.bytes.count > maxStoredBytes else {
        placed.append(
          Placed(
            name: name, bytes: result.bytes, digest: RequestDigest.hex(of: result.bytes), size: Int64(result.bytes.count),
            overwrite: result.overwrite))
        continue
      }
      guard let sharedFolder else {
        throw PipelineError(
          .tooLarge,
          "the output \(name.prefix(80)) is \(result.bytes.count) bytes, over the \(maxStoredBytes) bytes a result may take in the "
            + "queue's database; give the workers a shared folder (--shared-folder) for larger results")
      }
      let folder = SharedResultFolder(path: sharedFolder)
      let bytes = result.bytes
      let digest: String
      do {
        digest = try await BlockingPool.shared.run { try folder.write(bytes) }
      } catch {
        throw error as? PipelineError ?? PipelineError(.cancelled, "cancelled while a result was written")
      }
      placed.append(Placed(name: name, bytes: nil, digest: digest, size: Int64(bytes.count), overwrite: result.overwrite))
    }
    return placed
  }

  /// A stored result read back and checked: from its row's bytes, or from the shared folder.
  func load(name: String, bytes buffer: ByteBuffer?, digest: String, size: Int64, job: Int64, overwrite: Bool = true)
    async throws(PipelineError) -> JobResult
  {
    guard let buffer else {
      guard let sharedFolder else {
        throw PipelineError(
          .notFound, "the result \(name) of job \(job) is in the shared folder; give this command --shared-folder")
      }
      let folder = SharedResultFolder(path: sharedFolder)
      guard let expected = Int(exactly: size) else { throw PipelineError(.cacheCorrupt, "job \(job)'s result has a bad size") }
      do {
        return JobResult(
          bytes: try await BlockingPool.shared.run { try folder.read(digest, expectedBytes: expected) }, name: name,
          overwrite: overwrite)
      } catch {
        throw error as? PipelineError ?? PipelineError(.cancelled, "cancelled while a result was read")
      }
    }
    let bytes = Array(buffer.readableBytesView)
    guard Int64(bytes.count) == size, RequestDigest.hex(of: bytes) == digest else {
      throw PipelineError(.cacheCorrupt, "the stored result \(name) of job \(job) does not match its checksum")
    }
    return JobResult(bytes: bytes, name: name, overwrite: overwrite)
  }
}
