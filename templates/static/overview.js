// The overview's partition rows, refreshed in place every two seconds: no full-page flash, no
// lost scroll position. Served as /static/overview.js (the Content-Security-Policy allows no
// inline script).
setInterval(async () => {
  try {
    const response = await fetch('/fragments/partition-rows', { cache: 'no-store' });
    if (response.ok) {
      document.getElementById('partition-rows').innerHTML = await response.text();
    } else if (response.status === 401) {
      // The session ended: the reload goes through the sign-in form.
      location.reload();
    }
  } catch (_) { /* the next tick tries again */ }
}, 2000);
