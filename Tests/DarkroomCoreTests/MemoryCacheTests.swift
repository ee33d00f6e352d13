import DarkroomCore
import DarkroomTesting
import Testing

@Suite("Memory cache")
struct MemoryCacheTests {
  @Test("evicts the least recently used entry first; a hit refreshes an entry")
  func lruOrder() {
    let cache = MemoryCache<String, Int>(costLimit: 30, shards: 1)
    cache.setValue(1, forKey: "a", cost: 10)
    cache.setValue(2, forKey: "b", cost: 10)
    cache.setValue(3, forKey: "c", cost: 10)
    #expect(cache.value(forKey: "a") == 1)  // "b" is now the oldest
    cache.setValue(4, forKey: "d", cost: 10)
    #expect(cache.value(forKey: "b") == nil)
    #expect(cache.value(forKey: "a") == 1)
    #expect(cache.value(forKey: "c") == 3)
    #expect(cache.value(forKey: "d") == 4)
    #expect(cache.totalCost == 30)
  }

  @Test("bounded by count and by cost; too costly values are not kept")
  func bounds() {
    let byCount = MemoryCache<Int, Int>(costLimit: .max, countLimit: 3, shards: 1)
    for key in 0..<10 { byCount.setValue(key, forKey: key, cost: 1) }
    #expect(byCount.count == 3)
    #expect(byCount.value(forKey: 9) == 9 && byCount.value(forKey: 6) == nil)
    let byCost = MemoryCache<Int, Int>(costLimit: 100, shards: 1)
    byCost.setValue(1, forKey: 1, cost: 60)
    byCost.setValue(2, forKey: 2, cost: 60)
    #expect(byCost.count == 1 && byCost.totalCost == 60)
    byCost.setValue(3, forKey: 3, cost: 500)
    #expect(byCost.value(forKey: 3) == nil)
    #expect(byCost.value(forKey: 2) == 2)
    byCost.setValue(22, forKey: 2, cost: 10)  // replacing updates the cost
    #expect(byCost.totalCost == 10)
  }

  @Test("lifetimes expire on the injected clock")
  func lifetimes() {
    let start = ContinuousClock.now
    let offset = Protected(Duration.zero)
    let cache = MemoryCache<String, Int>(costLimit: 100, shards: 2, now: { start + offset.value })
    cache.setValue(1, forKey: "short", cost: 1, lifetime: .seconds(10))
    cache.setValue(2, forKey: "forever", cost: 1)
    offset.withLock { $0 = .seconds(9) }
    #expect(cache.value(forKey: "short") == 1)
    offset.withLock { $0 = .seconds(10) }
    #expect(cache.value(forKey: "short") == nil)
    #expect(cache.value(forKey: "forever") == 2)
    #expect(cache.count == 1)
  }

  @Test("trim, purge by predicate and clear")
  func trimAndPurge() {
    let cache = MemoryCache<String, Int>(costLimit: 1000, shards: 4)
    for index in 0..<40 { cache.setValue(index, forKey: "\(index % 2 == 0 ? "even" : "odd")-\(index)", cost: 10) }
    #expect(cache.totalCost == 400)
    cache.removeAll { $0.hasPrefix("odd-") }
    #expect(cache.count == 20)
    cache.trim(toCost: 100)
    #expect(cache.totalCost <= 100)
    cache.removeAll()
    #expect(cache.count == 0 && cache.totalCost == 0)
  }

  @Test("concurrent use keeps the bounds")
  func concurrency() async {
    let cache = MemoryCache<Int, [UInt8]>(costLimit: 10_000, countLimit: 500)
    await withTaskGroup(of: Void.self) { group in
      for worker in 0..<8 {
        group.addTask {
          for step in 0..<2000 {
            let key = (worker * 7919 + step * 31) % 1500
            if step % 3 == 0 {
              cache.setValue([UInt8](repeating: 1, count: key % 50), forKey: key, cost: key % 50)
            } else if let value = cache.value(forKey: key) {
              #expect(value.count == key % 50)
            }
            if step % 97 == 0 { cache.removeValue(forKey: key) }
          }
        }
      }
    }
    #expect(cache.totalCost <= 10_000)
    #expect(cache.count <= 500)
  }
}
