import Crypto
import Darkroom
import Foundation

/// A rendered answer: the encoded image, its ETag, and how long clients may keep it.
struct ServedImage: Sendable {
  /// The image as encoded.
  var image: EncodedImage
  /// A strong `ETag`: a hash of the bytes.
  var etag: String
  /// Until when it is fresh (for the result cache and `Cache-Control`).
  var expiresAt: Date
  /// Made from a source only its client may keep (`Cache-Control: private` or `Vary: *` at the
  /// origin): never cached, and answered `private`.
  var isPrivate = false

  init(image: EncodedImage, expiresAt: Date) {
    self.image = image
    self.expiresAt = expiresAt
    etag = Self.etag(of: image.bytes)
  }

  init(image: EncodedImage, etag: String, expiresAt: Date) {
    self.image = image
    self.etag = etag
    self.expiresAt = expiresAt
  }

  /// `"` + 22 characters of URL-safe base64 of the SHA-256 of `bytes` + `"`.
  static func etag(of bytes: ImageBytes) -> String {
    let digest = bytes.withUnsafeBytes { SHA256.hash(data: $0) }
    let text = Data(digest.prefix(16)).base64EncodedString().replacingOccurrences(of: "+", with: "-")
      .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    return "\"\(text)\""
  }

  /// Seconds left until ``expiresAt``, from `now`, never negative.
  func maxAge(now: Date) -> Int {
    let left = expiresAt.timeIntervalSince(now)
    return left.isFinite ? Int(min(max(0, left), 315_360_000)) : 0
  }
}

/// The server's result cache: memory bounded by bytes in front of an optional disk store.
///
/// A hit is served without fetching or decoding; a disk hit is copied into memory. Entries are
/// keyed by the source's identity and every stage's cache identifier, the chosen format
/// included, so two answers that differ in anything never share an entry. Stale entries are
/// misses. Disk entries are checked when read (a damaged entry is a miss, and is removed).
final class ResultCache: Sendable {
  private let memory: MemoryCache<String, ServedImage>
  private let disk: DiskStore?

  init(memoryBytes: Int, diskDirectory: String?, diskBytes: Int) throws(PipelineError) {
    memory = MemoryCache(costLimit: memoryBytes)
    do {
      disk = try diskDirectory.map { try DiskStore.open(directory: $0, maxBytes: diskBytes) }
    } catch {
      throw PipelineError(.cacheUnavailable, "the result cache's folder cannot be opened: \(error)")
    }
  }

  /// The memory level's fresh entry for `key`, without touching the disk.
  func memoryHit(_ key: String, now: Date = Date()) -> ServedImage? {
    guard let hit = memory.value(forKey: key), hit.expiresAt > now else { return nil }
    return hit
  }

  func lookup(_ key: String, now: Date = Date()) async -> ServedImage? {
    if let hit = memoryHit(key, now: now) { return hit }
    guard let disk, let entry = try? await disk.entry(forKey: key), entry.isFresh(at: now),
      let image = entry.value as? EncodedImage, let etag = entry.validators.etag, let expiresAt = entry.expiresAt
    else { return nil }
    let served = ServedImage(image: image, etag: etag, expiresAt: expiresAt)
    remember(served, key: key)
    return served
  }

  func store(_ served: ServedImage, key: String, source: String) async {
    remember(served, key: key)
    guard let disk else { return }
    let entry = CacheEntry(value: served.image, expiresAt: served.expiresAt, validators: CacheValidators(etag: served.etag))
    // A full or broken disk loses only the second level: the answer is already made.
    try? await disk.setEntry(entry, forKey: key, source: source)
  }

  func remember(_ served: ServedImage, key: String) {
    let lifetime = served.expiresAt.timeIntervalSinceNow
    guard lifetime > 0 else { return }
    memory.setValue(served, forKey: key, cost: served.image.bytes.count + key.utf8.count, lifetime: .seconds(lifetime))
  }

  /// Writes what the disk store keeps in memory (its access times) before the process ends.
  func close() { try? disk?.flush() }
}
