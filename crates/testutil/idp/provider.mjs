// A real OpenID provider for the tests: the certified `oidc-provider` package, run on loopback
// with one RSA signing key. Everything OpenID Connect (discovery, JWKS, authorization with
// PKCE, the token endpoint, ID tokens, userinfo, refresh, dynamic client registration) is the
// package's own. The harness adds only what a browser and an attacker would do:
//   /interaction/:uid  completes the login and consent as the account the test chose
//                      (a person clicking "sign in" and "allow");
//   /_test/*           lets the test register accounts, choose who signs in next, and tamper
//                      with the next ID token in flight (re-signed with a key the provider does
//                      not publish, for another audience, or already expired).
// Run by crates/testutil (`testutil::idp`) with `node --input-type=module -e`, from the
// directory where scripts/setup.sh --tests installed oidc-provider.
import http from 'node:http';
import Provider from 'oidc-provider';
import * as jose from 'jose';

const accounts = new Map();
let nextLogin = null;
let tamper = null;

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
const signingJwk = { ...(await jose.exportJWK(privateKey)), kid: 'signing-key', alg: 'RS256', use: 'sig' };
// Same kid, different key: what a forger without the provider's key can produce.
const { privateKey: rogueKey } = await jose.generateKeyPair('RS256');

const provider = new Provider(issuer, {
  jwks: { keys: [signingJwk] },
  cookies: { keys: ['coder-rs-test-idp'] },
  features: {
    registration: { enabled: true },
    devInteractions: { enabled: false },
  },
  scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username', 'nickname', 'picture'],
    groups: ['groups'],
  },
  // Scope claims go into the ID token too (Coder merges them with userinfo's).
  conformIdTokenClaims: false,
  issueRefreshToken: async () => true,
  // Spent refresh tokens are refused, so a test can see a refresh really happened.
  rotateRefreshToken: true,
  findAccount: async (ctx, id) => {
    const claims = accounts.get(id);
    if (!claims) return undefined;
    return { accountId: id, claims: async () => ({ ...claims, sub: id }) };
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
});

// The attacker in the middle of the token response.
provider.use(async (ctx, next) => {
  await next();
  if (ctx.path !== '/token' || !tamper || !ctx.body || typeof ctx.body !== 'object' || !ctx.body.id_token) return;
  const mode = tamper;
  tamper = null;
  const claims = jose.decodeJwt(ctx.body.id_token);
  let key = privateKey;
  if (mode === 'bad_signature') key = rogueKey;
  if (mode === 'wrong_audience') claims.aud = 'some-other-client';
  if (mode === 'expired') {
    const now = Math.floor(Date.now() / 1000);
    claims.iat = now - 7200;
    claims.exp = now - 3600;
  }
  ctx.body.id_token = await new jose.SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: 'signing-key', typ: 'JWT' })
    .sign(key);
});

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : {};
}

function reply(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

const callback = provider.callback();
server.on('request', async (req, res) => {
  try {
    const path = new URL(req.url, issuer).pathname;
    if (path.startsWith('/interaction/')) {
      const details = await provider.interactionDetails(req, res);
      if (!nextLogin) return reply(res, 400, { error: 'the test chose nobody to sign in' });
      const accountId = nextLogin;
      const grant = new provider.Grant({ accountId, clientId: details.params.client_id });
      grant.addOIDCScope(details.params.scope);
      const grantId = await grant.save();
      return await provider.interactionFinished(
        req, res, { login: { accountId }, consent: { grantId } }, { mergeWithLastSubmission: false });
    }
    if (path === '/_test/account' && req.method === 'POST') {
      const { sub, claims } = await readJson(req);
      accounts.set(sub, claims);
      return reply(res, 200, {});
    }
    if (path === '/_test/login_as' && req.method === 'POST') {
      nextLogin = (await readJson(req)).sub;
      return reply(res, 200, {});
    }
    if (path === '/_test/tamper' && req.method === 'POST') {
      tamper = (await readJson(req)).mode;
      return reply(res, 200, {});
    }
    return callback(req, res);
  } catch (err) {
    reply(res, 500, { error: String(err) });
  }
});

console.log(`READY ${issuer}`);
