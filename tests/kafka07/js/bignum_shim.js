// prozess@0.7.0 (and its buffermaker) require `bignum`, a native addon that no longer builds on Node 20.
// Only a few of its calls are used: bignum(x), .add, .eq, .toString, .toNumber, .toBuffer({size: 8}) and
// bignum.fromBuffer. This stands in for it with BigInt, loaded in place of the package by the drivers here.
'use strict';
const Module = require('module');

function BigNum(value) {
  if (!(this instanceof BigNum)) return new BigNum(value);
  if (value instanceof BigNum) this.value = value.value;
  else if (typeof value === 'number') this.value = BigInt(Math.trunc(value));
  else this.value = BigInt(value);
}
BigNum.prototype.add = function (other) { return new BigNum(this.value + BigNum(other).value); };
BigNum.prototype.eq = function (other) { return this.value === BigNum(other).value; };
BigNum.prototype.toString = function () { return this.value.toString(); };
BigNum.prototype.toNumber = function () { return Number(this.value); };
BigNum.prototype.toJSON = function () { return Number(this.value); };
BigNum.prototype.toBuffer = function (opts) {
  const size = (opts && opts.size) || 8;
  const buf = Buffer.alloc(size);
  buf.writeBigInt64BE(BigInt.asIntN(64, this.value));
  return buf;
};
BigNum.fromBuffer = function (buf) { return new BigNum(Buffer.from(buf).readBigInt64BE(0)); };

const load = Module._load;
Module._load = function (request, parent, isMain) {
  if (request === 'bignum') return BigNum;
  return load.apply(this, arguments);
};
module.exports = BigNum;
