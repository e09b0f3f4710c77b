// A real OpenID provider for the tests: the certified `oidc-provider` package, run on loopback
// with one RSA signing key. Everything OpenID Connect and OAuth 2.0 (discovery, JWKS,
// authorization with PKCE, the token endpoint, ID tokens, userinfo, refresh with rotation,
// dynamic client registration, introspection (RFC 7662), revocation (RFC 7009), the device
// flow (RFC 8628)) is the package's own. The same provider is the "git provider" of the external
// auth tests; crates/testutil (`testutil::gitserver`) puts a git server behind its tokens.
// The harness adds only what a browser, the person and an attacker would do:
//   /interaction/:uid  completes the login and consent as the account the test chose
//                      (a person clicking "sign in" and "allow");
//   /_test/*           lets the test register accounts, choose who signs in next, tamper with
//                      the next ID token in flight (re-signed with a key the provider does not
//                      publish, for another audience, or already expired), approve a device
//                      code as a person at the verification page would, shorten access tokens'
//                      lifetime, revoke an account's grants (the person removing the app at the
//                      provider), count refreshes, and answer a git server's auth_request or a
//                      bearer-token validation for an access token.
// Two dialects real clients speak are accepted, as the providers Coder talks to accept them:
//   - github.com's device flow: a POST to /device/auth or /token with the parameters in the
//     query string and no body (what Coder sends), answered 200 even for an error such as
//     authorization_pending, as github.com answers;
//   - Coder's RFC 7009 revocation request also carries `Authorization: Bearer <access token>`
//     beside client_id and client_secret in the body; that header is dropped at /token/revocation
//     (the package would refuse two client authentication mechanisms).
// Run by crates/testutil (`testutil::idp`) with `node --input-type=module -e`, from the
// directory where scripts/setup.sh --tests installed oidc-provider.
import http from 'node:http';
import Provider from 'oidc-provider';
import * as jose from 'jose';

const accounts = new Map();
let nextLogin = null;
let tamper = null;
// Seconds an access token lives; null: the package's default (an hour).
let accessTokenTtl = null;
const stats = { refreshes: 0, device_approvals: 0, git_auth_allowed: 0, git_auth_denied: 0 };
// Every grant saved, by account, so /_test/revoke_grants can revoke them all.
const grantsByAccount = new Map();

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
    introspection: { enabled: true },
    revocation: { enabled: true },
    deviceFlow: { enabled: true },
  },
  ttl: {
    // A regular function, as the package requires; the other lifetimes keep their defaults.
    AccessToken: (ctx, token) => accessTokenTtl ?? token.resourceServer?.accessTokenTTL ?? 60 * 60,
  },
  // The last four are the git providers' own (github.com's defaults in Coder, then GitLab's): the
  // package grants only scopes it knows, and refuses a request that asks for none of them.
  scopes: ['openid', 'offline_access', 'email', 'profile', 'groups', 'repo', 'workflow', 'read_api', 'write_repository'],
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

provider.on('grant.success', (ctx) => {
  if (ctx.oidc.params.grant_type === 'refresh_token') stats.refreshes += 1;
});
provider.on('grant.saved', (grant) => {
  if (!grant.accountId) return;
  if (!grantsByAccount.has(grant.accountId)) grantsByAccount.set(grant.accountId, new Set());
  grantsByAccount.get(grant.accountId).add(grant.jti);
});

// github.com's dialect: its errors (authorization_pending, slow_down, bad codes) come back 200.
provider.use(async (ctx, next) => {
  await next();
  if (ctx.req.githubDialect && ctx.status >= 400 && ctx.body && typeof ctx.body === 'object' && ctx.body.error) {
    ctx.status = 200;
  }
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

// An access token the provider issued that is neither expired nor revoked, and whose grant (the
// person's authorization of the app) still stands.
async function activeAccessToken(value) {
  if (!value) return undefined;
  const token = await provider.AccessToken.find(value);
  if (!token || token.isExpired) return undefined;
  if (token.grantId && !(await provider.Grant.find(token.grantId))) return undefined;
  return token;
}

// The token in a git client's `Authorization: Basic` header, as Coder hands it to git: GitLab's
// username `oauth2`, Bitbucket's `x-token-auth` and GitHub's `x-access-token` carry it as the
// password; otherwise (GitHub's default) the username is the token.
function gitToken(header) {
  const match = /^Basic\s+(\S+)$/i.exec(header ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const user = colon === -1 ? decoded : decoded.slice(0, colon);
  const password = colon === -1 ? '' : decoded.slice(colon + 1);
  return ['oauth2', 'x-token-auth', 'x-access-token'].includes(user) ? password : user;
}

// User codes are compared as the package stores them: upper case, without separators.
function normalizeUserCode(input) {
  return String(input).toUpperCase().replace(/\W/g, '');
}

async function revokeGrants(sub) {
  const grants = [...(grantsByAccount.get(sub) ?? [])];
  grantsByAccount.delete(sub);
  for (const grantId of grants) {
    await Promise.all([
      provider.AccessToken.revokeByGrantId(grantId),
      provider.RefreshToken.revokeByGrantId(grantId),
      provider.AuthorizationCode.revokeByGrantId(grantId),
      provider.DeviceCode.revokeByGrantId(grantId),
      provider.Grant.adapter.destroy(grantId),
    ]);
  }
  return grants.length;
}

const callback = provider.callback();
server.on('request', async (req, res) => {
  try {
    const url = new URL(req.url, issuer);
    const path = url.pathname;
    if (
      req.method === 'POST' && (path === '/device/auth' || path === '/token') && url.search
      && !req.headers['content-type'] && !(Number(req.headers['content-length']) > 0)
      && !req.headers['transfer-encoding']
    ) {
      // github.com's dialect: the parameters in the query string, no body. The package takes an
      // already parsed body from `req.body` once the stream is consumed.
      for await (const chunk of req) void chunk;
      req.headers['content-type'] = 'application/x-www-form-urlencoded';
      req.headers['content-length'] = '0';
      req.body = Object.fromEntries(url.searchParams);
      req.githubDialect = true;
    }
    if (req.method === 'POST' && path === '/token/revocation' && /^Bearer\s/i.test(req.headers.authorization ?? '')) {
      delete req.headers.authorization;
    }
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
    if (path === '/_test/config' && req.method === 'POST') {
      const body = await readJson(req);
      if ('access_token_ttl_seconds' in body) {
        const ttl = body.access_token_ttl_seconds;
        if (ttl !== null && !(Number.isSafeInteger(ttl) && ttl > 0)) {
          return reply(res, 400, { error: 'access_token_ttl_seconds must be a positive integer or null' });
        }
        accessTokenTtl = ttl;
      }
      return reply(res, 200, { access_token_ttl_seconds: accessTokenTtl });
    }
    if (path === '/_test/stats' && req.method === 'GET') {
      return reply(res, 200, stats);
    }
    if (path === '/_test/revoke_grants' && req.method === 'POST') {
      const revoked = await revokeGrants((await readJson(req)).sub);
      return reply(res, 200, { revoked });
    }
    if (path === '/_test/device/approve' && req.method === 'POST') {
      // What the person does at the verification page: enter the code, sign in, allow (or deny).
      const { user_code: userCode, sub, deny } = await readJson(req);
      const code = await provider.DeviceCode.findByUserCode(normalizeUserCode(userCode ?? ''));
      if (!code) return reply(res, 404, { error: `no pending device code ${userCode}` });
      if (code.accountId || code.error) return reply(res, 409, { error: `device code ${userCode} already used` });
      if (deny) {
        Object.assign(code, { error: 'access_denied', errorDescription: 'End-User aborted interaction' });
        await code.save();
        return reply(res, 200, {});
      }
      if (!accounts.has(sub)) return reply(res, 400, { error: `no account ${sub}` });
      const scope = code.params.scope ?? '';
      const grant = new provider.Grant({ accountId: sub, clientId: code.clientId });
      grant.addOIDCScope(scope);
      const grantId = await grant.save();
      Object.assign(code, { accountId: sub, grantId, scope, authTime: Math.floor(Date.now() / 1000) });
      await code.save();
      stats.device_approvals += 1;
      return reply(res, 200, {});
    }
    if (path === '/_test/git-auth') {
      // nginx's auth_request: 2xx lets the git request through, 401 refuses it.
      if (await activeAccessToken(gitToken(req.headers.authorization))) {
        stats.git_auth_allowed += 1;
        res.writeHead(204);
        return res.end();
      }
      stats.git_auth_denied += 1;
      res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' });
      return res.end();
    }
    if (path === '/_test/validate' && req.method === 'GET') {
      // A validation URL for Coder: 200 for a live access token, 401 otherwise.
      const bearer = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
      const token = await activeAccessToken(bearer);
      if (!token) return reply(res, 401, { error: 'invalid_token' });
      const claims = accounts.get(token.accountId) ?? {};
      return reply(res, 200, {
        sub: token.accountId,
        login: claims.preferred_username ?? token.accountId,
        name: claims.name ?? '',
        scope: token.scope ?? '',
      });
    }
    return callback(req, res);
  } catch (err) {
    reply(res, 500, { error: String(err) });
  }
});

console.log(`READY ${issuer}`);
