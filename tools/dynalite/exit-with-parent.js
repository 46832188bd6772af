// Preloaded into dynalite by the Go tests (node --require): exit when stdin
// reaches its end. The test process holds the other end of the pipe, so
// dynalite goes away with the test process however that ends, even killed.
'use strict'
process.stdin.on('end', () => process.exit(0))
process.stdin.on('error', () => process.exit(0))
process.stdin.resume()
